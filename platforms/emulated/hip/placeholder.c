int emu_placeholder_hip(void) { return 0; }
