/* The compiled half of braid.protocol.batch.check_batch: the broker's walk of a batch payload.
 *
 * A batch payload is a run of [u32 size][SingleMessageMetadata][payload]. walk() steps over the
 * messages whose metadata holds only the fields clients write - partition_key (2) and
 * ordering_key (7) of under 128 bytes, payload_size (3), and the varints sequence_id (8),
 * event_time (5), ... (4, 6, 9, 10) - reading payload_size with protobuf's semantics (the last
 * occurrence wins, an int32 keeps the low 32 bits of its varint), exactly as the pure-Python
 * scanner in batch.py does. It never raises for the data: at the first message it does not step
 * over cleanly (any other field, a varint that runs long, a size that does not fit, a missing or
 * negative payload_size) it stops and returns where, and the Python walk decides that message -
 * with protobuf, and with the error text - before calling walk() again for the rest. So the
 * compiled walk can only ever accept what the Python walk accepts; tests hold the two together.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A varint of at most this many bytes is read here; longer ones go to the Python walk. */
#define MAX_VARINT_BYTES 9

static PyObject *
walk(PyObject *module, PyObject *args)
{
    Py_buffer buffer;
    Py_ssize_t count, index, pos;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*nnn:walk", &buffer, &count, &index, &pos)) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)buffer.buf;
    const Py_ssize_t end = buffer.len;
    if (index < 0 || pos < 0 || pos > end) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "index and pos must lie inside the batch");
        return NULL;
    }
    while (index < count) {
        if (end - pos < 4) {
            break;
        }
        const uint32_t meta_size = ((uint32_t)data[pos] << 24) | ((uint32_t)data[pos + 1] << 16) |
                                   ((uint32_t)data[pos + 2] << 8) | (uint32_t)data[pos + 3];
        Py_ssize_t p = pos + 4;
        if ((uint64_t)meta_size > (uint64_t)(end - p)) {
            break;
        }
        const Py_ssize_t meta_end = p + (Py_ssize_t)meta_size;
        int64_t size = -1; /* payload_size absent */
        int clean = 1;
        while (p < meta_end) {
            const unsigned char tag = data[p++];
            if (tag == 0x18) { /* payload_size: int32 */
                uint64_t value = 0;
                int done = 0;
                for (int i = 0; i < MAX_VARINT_BYTES && p < meta_end; i++) {
                    const unsigned char byte = data[p++];
                    value |= (uint64_t)(byte & 0x7F) << (7 * i);
                    if (byte < 0x80) {
                        done = 1;
                        break;
                    }
                }
                if (!done) {
                    clean = 0;
                    break;
                }
                value &= 0xFFFFFFFFu;
                size = value < 0x80000000u ? (int64_t)value : -1;
            }
            else if (tag == 0x40 || tag == 0x20 || tag == 0x28 || tag == 0x30 || tag == 0x48 ||
                     tag == 0x50) { /* sequence_id first: every client writes it */
                int done = 0;
                for (int i = 0; i < MAX_VARINT_BYTES && p < meta_end; i++) {
                    if (data[p++] < 0x80) {
                        done = 1;
                        break;
                    }
                }
                if (!done) {
                    clean = 0;
                    break;
                }
            }
            else if ((tag == 0x12 || tag == 0x3A) && p < meta_end && data[p] < 0x80) {
                p += 1 + (Py_ssize_t)data[p];
            }
            else {
                clean = 0;
                break;
            }
        }
        if (!clean || p != meta_end || size < 0 || size > (int64_t)(end - meta_end)) {
            break;
        }
        pos = meta_end + (Py_ssize_t)size;
        index++;
    }
    PyBuffer_Release(&buffer);
    return Py_BuildValue("nn", index, pos);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(data, count, index, pos) -> (index, pos)\n\n"
     "Step over messages index.. of a batch payload from byte pos while each is a clean\n"
     "common shape and fits; return the first message not stepped over (count when all\n"
     "were) and where it starts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_batch_walk",
    "The compiled batch walk of braid.protocol.batch.check_batch (see _batch_walk.c).",
    0,
    methods,
};

PyMODINIT_FUNC
PyInit__batch_walk(void)
{
    return PyModuleDef_Init(&module_def);
}
