int emu_placeholder_hf(void) { return 0; }
