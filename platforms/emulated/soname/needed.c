/* Build-time only: an empty library whose SONAME is libhipfile.so, linked
 * into libhipfile.so.0 so that the linker records DT_NEEDED libhipfile.so
 * (the real library's own SONAME is libhipfile.so.0). Not installed. */
typedef int hipfile_emu_needed_name_t;
