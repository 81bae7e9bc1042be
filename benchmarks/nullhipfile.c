/* A libhipfile that does nothing: every call succeeds at once. Used to time
 * the cost of the Python binding's submit path alone. Never used for I/O. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct { int err; int hip_drv_err; } hipFileError_t;
static const hipFileError_t ok = {0, 0};
static char handle_storage[64];

hipFileError_t hipFileDriverOpen(void) { return ok; }
hipFileError_t hipFileDriverClose(void) { return ok; }
int64_t hipFileUseCount(void) { return 1; }
hipFileError_t hipFileGetVersion(unsigned *a, unsigned *b, unsigned *c) {
    *a = 0; *b = 2; *c = 0; return ok;
}
const char *hipFileGetOpErrorString(int e) { (void)e; return "null library"; }
hipFileError_t hipFileHandleRegister(void **fh, void *descr) {
    (void)descr; *fh = handle_storage; return ok;
}
void hipFileHandleDeregister(void *fh) { (void)fh; }
hipFileError_t hipFileStreamRegister(void *s, unsigned f) { (void)s; (void)f; return ok; }
hipFileError_t hipFileStreamDeregister(void *s) { (void)s; return ok; }
hipFileError_t hipFileReadAsync(void *fh, void *buf, size_t *size, off_t *foff, off_t *boff,
                                ssize_t *bytes, void *stream) {
    (void)fh; (void)buf; (void)size; (void)foff; (void)boff; (void)stream;
    *bytes = 0;
    return ok;
}
hipFileError_t hipFileWriteAsync(void *fh, void *buf, size_t *size, off_t *foff, off_t *boff,
                                 ssize_t *bytes, void *stream) {
    return hipFileReadAsync(fh, buf, size, foff, boff, bytes, stream);
}
