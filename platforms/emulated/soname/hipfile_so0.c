/* libhipfile.so.0: the name programs linked against hipFile ask for (its
 * SONAME), as a file of its own, since a wheel cannot hold the symbolic link a
 * ROCm install has. It defines nothing: it only depends on libhipfile.so (the
 * library itself, found through RUNPATH $ORIGIN), so a program that needs
 * libhipfile.so.0 gets the one copy of the library, and dlsym through a handle
 * to this file finds the library's functions among its dependencies. */
typedef int hipfile_emu_soname_file_t;
