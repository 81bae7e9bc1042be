/* The stream-ordered parallel I/O engine: C threads that move the bytes of
 * stream-ordered reads and writes with synchronous hipFileRead/hipFileWrite
 * calls, gated on a flag the caller's stream writes, and released to other
 * streams through a flag they wait on.
 *
 * Threads
 * - Workers take chunks of ready operations, oldest operation first, and run
 *   the transfer loop with no Python and no GIL.
 * - One gate thread polls the gate flags of submitted operations and moves
 *   an operation to the ready queue once its caller's stream has written the
 *   gate value (everything enqueued on that stream before the submit has
 *   finished).
 *
 * Lifetimes
 * - An operation is reference counted: its creator holds one reference, the
 *   engine one from submit to completion, every host function enqueued to
 *   wait for it one. It is freed when the count reaches 0.
 * - The engine never touches Python objects: whoever submits keeps the file,
 *   buffer and flag memory alive until the operation is done.
 */
#ifndef HIPFILE_ENGINE_H
#define HIPFILE_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef ssize_t (*hfe_io_fn)(void *fh, void *base, size_t size, int64_t file_offset,
                             int64_t buffer_offset);
typedef int (*hfe_set_device_fn)(int device);

typedef struct hfe_op hfe_op;

/* Start the threads (idempotent; a different thread count restarts the
 * pool once it is idle). Returns 0 or an errno value. */
int hfe_start(int nthreads, hfe_set_device_fn set_device);
/* Stop the threads once every submitted operation has finished, waiting at
 * most timeout_s seconds (< 0: no limit). Returns 0, or ETIMEDOUT when
 * operations were still outstanding (the threads are then left running). */
int hfe_stop(double timeout_s);
int hfe_threads(void);
/* Operations submitted and not yet finished. */
long hfe_outstanding(void);

/* A new operation (reference count 1, the caller's). `flag`, when not
 * NULL, receives `flag_value` (release store) when the operation finishes. */
hfe_op *hfe_op_new(int opcode, hfe_io_fn fn, void *fh, void *base, size_t size,
                   int64_t file_offset, int64_t buffer_offset, int device,
                   size_t task_size, uint32_t *flag, uint32_t flag_value);
void hfe_op_incref(hfe_op *op);
void hfe_op_decref(hfe_op *op);

/* Submit n operations at once. They start when *gate >= gate_value
 * (wrap-around compare); with gate NULL and host_gate not NULL, when the
 * host function hfe_host_open(*host_gate) has run on the caller's stream;
 * with both NULL, at once. Returns 0 or an errno value (nothing is
 * submitted then). */
int hfe_submit(hfe_op **ops, int n, const uint32_t *gate, uint32_t gate_value,
               void **host_gate);

int hfe_op_done(const hfe_op *op);
/* Wait up to timeout_s seconds (< 0: no limit); 1 when done, 0 otherwise. */
int hfe_op_wait(hfe_op *op, double timeout_s);
/* Bytes moved, or a negative result of the library (-1: see *err_no). */
int64_t hfe_op_result(const hfe_op *op, int *err_no);
/* The chunk count and the number of library calls made (for tests). */
long hfe_op_calls(const hfe_op *op);

/* A host function (hipHostFn_t) that blocks its stream until the operation
 * `arg` is done, then drops the reference taken for it. It makes no HIP call
 * and takes no GIL. */
void hfe_host_wait(void *arg);
/* A host function that opens the gate `arg` returned by hfe_submit. */
void hfe_host_open(void *arg);

#ifdef __cplusplus
}
#endif
#endif
