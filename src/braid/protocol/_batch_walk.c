/* The compiled half of braid.protocol.batch.check_batch: the broker's walk of a batch payload.
 *
 * A batch payload is a run of [u32 size][SingleMessageMetadata][payload]. walk() steps over the
 * messages whose metadata holds only the fields clients write - properties (1) made of key (1)
 * and value (2) strings, partition_key (2), ordering_key (7), payload_size (3), and the varints
 * sequence_id (8), event_time (5), ... (4, 6, 9, 10) - reading payload_size with protobuf's
 * semantics (the last occurrence wins, an int32 keeps the low 32 bits of its varint). It is
 * conservative: every metadata it steps over is one protobuf parses, to the same payload_size
 * (proto2 strings are not checked for UTF-8; lengths are read only in their one- or two-byte
 * canonical form). It never raises for the data: at the first message it does not step over
 * cleanly (any other field, a varint that runs long, a size that does not fit, a missing or
 * negative payload_size) it stops and returns where, and the Python walk decides that message -
 * with protobuf, and with the error text - before calling walk() again for the rest. So the
 * compiled walk accepts nothing the Python walk refuses; tests hold the two together, and both
 * against the protobuf decoder.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A varint of at most this many bytes is read here; longer ones go to the Python walk. */
#define MAX_VARINT_BYTES 9

/* Read the length of a length-delimited field at *p (before limit): one byte, or two in
 * canonical form (the second byte 1..127). 0 for anything else: the Python walk decides. */
static int
read_length(const unsigned char *data, Py_ssize_t *p, Py_ssize_t limit, Py_ssize_t *length)
{
    if (*p >= limit) {
        return 0;
    }
    const unsigned char first = data[*p];
    if (first < 0x80) {
        *length = first;
        *p += 1;
        return 1;
    }
    if (limit - *p < 2 || data[*p + 1] == 0 || data[*p + 1] >= 0x80) {
        return 0;
    }
    *length = (Py_ssize_t)(first & 0x7F) | ((Py_ssize_t)data[*p + 1] << 7);
    *p += 2;
    return 1;
}

/* A length-delimited field's bytes from *p (the tag just read) within limit; then *p is past
 * them. A property (KeyValue) must hold only key (1) and value (2) strings, each as above. */
static int
skip_bytes_field(const unsigned char *data, Py_ssize_t *p, Py_ssize_t limit, int is_property)
{
    Py_ssize_t length;
    if (!read_length(data, p, limit, &length) || length > limit - *p) {
        return 0;
    }
    const Py_ssize_t field_end = *p + length;
    if (is_property) {
        Py_ssize_t q = *p;
        while (q < field_end) {
            const unsigned char tag = data[q++];
            Py_ssize_t inner;
            if ((tag != 0x0A && tag != 0x12) || !read_length(data, &q, field_end, &inner) ||
                inner > field_end - q) {
                return 0;
            }
            q += inner;
        }
    }
    *p = field_end;
    return 1;
}

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
            else if (tag == 0x0A || tag == 0x12 || tag == 0x3A) {
                /* properties; partition_key, ordering_key */
                if (!skip_bytes_field(data, &p, meta_end, tag == 0x0A)) {
                    clean = 0;
                    break;
                }
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
    .m_name = "_batch_walk",
    .m_doc = "The compiled batch walk of braid.protocol.batch.check_batch (see _batch_walk.c).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__batch_walk(void)
{
    return PyModuleDef_Init(&module_def);
}
