/* The compiled half of braid.client.columns.EntryColumnDecoder: a batch payload into column
 * lists, for the messages whose metadata is the commonest shape (ADR 0041).
 *
 * A batch payload is a run of [u32 size][SingleMessageMetadata][payload]. decode() reads the
 * messages from index/pos on and appends, per message kept, to the column lists: the payload
 * (bytes), the key (str, or None), the event time (int, or None when 0 or unset), the sequence
 * id (the message's own, else base_sequence + index) and the batch index. It handles metadata
 * made of partition_key (2), payload_size (3), compacted_out (4), event_time (5),
 * partition_key_b64_encoded (6), ordering_key (7), sequence_id (8), null_value (9) and
 * null_partition_key (10), with protobuf's semantics (the last occurrence of a field wins, an
 * int32 keeps the low 32 bits of its varint, a bool is any non-zero varint); a compacted-out
 * message is stepped over. It never raises for the data: at the first message it does not
 * decode cleanly - properties (1) or any other field, a varint of more than 9 bytes, a length in
 * other than canonical one- or two-byte form, a key that is not UTF-8, a payload_size that is
 * missing, negative or past the end, a sequence id past 2**64 - it stops before appending
 * anything for it and returns (index, pos) of that message; the Python decoder decodes that
 * message (parsing its metadata with protobuf, raising the typed error for damaged data) and
 * calls decode() again after it. Keys are decoded once per distinct byte string (key_memo, a
 * dict the caller owns; cleared past 4096 entries). Tests hold this against the Python decoder
 * and the Message path.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_VARINT_BYTES 9
#define KEY_MEMO_SIZE 4096

static int
read_varint(const unsigned char *data, Py_ssize_t *p, Py_ssize_t limit, uint64_t *value)
{
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t q = *p;
    for (int i = 0; i < MAX_VARINT_BYTES; i++) {
        if (q >= limit) {
            return 0;
        }
        const unsigned char byte = data[q++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = result;
            *p = q;
            return 1;
        }
        shift += 7;
    }
    return 0;
}

/* One byte, or two in canonical form (the second byte 1..127); 0 for anything else. */
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

typedef struct {
    Py_ssize_t key_start; /* -1: no partition_key */
    Py_ssize_t key_length;
    int has_payload_size;
    int32_t payload_size;
    int compacted;
    uint64_t event_time;
    int has_sequence;
    uint64_t sequence;
} single_t;

/* The metadata in data[p:end]; 0 when it is not of the shape handled here. */
static int
parse_single(const unsigned char *data, Py_ssize_t p, Py_ssize_t end, single_t *out)
{
    out->key_start = -1;
    out->key_length = 0;
    out->has_payload_size = 0;
    out->payload_size = 0;
    out->compacted = 0;
    out->event_time = 0;
    out->has_sequence = 0;
    out->sequence = 0;
    while (p < end) {
        const unsigned char tag = data[p++];
        uint64_t value;
        Py_ssize_t length;
        switch (tag) {
        case 0x12: /* partition_key */
            if (!read_length(data, &p, end, &length) || length > end - p) {
                return 0;
            }
            out->key_start = p;
            out->key_length = length;
            p += length;
            break;
        case 0x3A: /* ordering_key: not a column */
            if (!read_length(data, &p, end, &length) || length > end - p) {
                return 0;
            }
            p += length;
            break;
        case 0x18: /* payload_size (int32) */
            if (!read_varint(data, &p, end, &value)) {
                return 0;
            }
            out->has_payload_size = 1;
            out->payload_size = (int32_t)(uint32_t)value;
            break;
        case 0x20: /* compacted_out */
            if (!read_varint(data, &p, end, &value)) {
                return 0;
            }
            out->compacted = value != 0;
            break;
        case 0x28: /* event_time */
            if (!read_varint(data, &p, end, &value)) {
                return 0;
            }
            out->event_time = value;
            break;
        case 0x40: /* sequence_id */
            if (!read_varint(data, &p, end, &value)) {
                return 0;
            }
            out->has_sequence = 1;
            out->sequence = value;
            break;
        case 0x30: /* partition_key_b64_encoded */
        case 0x48: /* null_value */
        case 0x50: /* null_partition_key */
            if (!read_varint(data, &p, end, &value)) {
                return 0;
            }
            break;
        default: /* properties (1) and anything else: the Python decoder */
            return 0;
        }
    }
    return 1;
}

/* The key of data[start:start+length] as str (memoized), or NULL with no error set when it is
 * not UTF-8, or NULL with an error set (memory). */
static PyObject *
key_of(const unsigned char *data, Py_ssize_t start, Py_ssize_t length, PyObject *memo, int *bad)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)data + start, length);
    if (raw == NULL) {
        return NULL;
    }
    PyObject *key = PyDict_GetItemWithError(memo, raw); /* borrowed */
    if (key != NULL) {
        Py_DECREF(raw);
        Py_INCREF(key);
        return key;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(raw);
        return NULL;
    }
    key = PyUnicode_DecodeUTF8((const char *)data + start, length, "strict");
    if (key == NULL) {
        Py_DECREF(raw);
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            *bad = 1;
        }
        return NULL;
    }
    if (PyDict_GET_SIZE(memo) >= KEY_MEMO_SIZE) {
        PyDict_Clear(memo);
    }
    if (PyDict_SetItem(memo, raw, key) < 0) {
        Py_DECREF(raw);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(raw);
    return key;
}

static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL) {
        return -1;
    }
    const int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static PyObject *
decode(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count, index, pos;
    unsigned long long base_sequence;
    PyObject *memo, *values, *keys, *event_times, *sequence_ids, *indexes;
    if (!PyArg_ParseTuple(args, "y*nnnKO!O!O!O!O!O!", &view, &count, &index, &pos,
                          &base_sequence, &PyDict_Type, &memo, &PyList_Type, &values,
                          &PyList_Type, &keys, &PyList_Type, &event_times, &PyList_Type,
                          &sequence_ids, &PyList_Type, &indexes)) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    const Py_ssize_t end = view.len;
    for (; index < count; index++) {
        if (pos < 0 || end - pos < 4) {
            break;
        }
        const Py_ssize_t size = ((Py_ssize_t)data[pos] << 24) | ((Py_ssize_t)data[pos + 1] << 16) |
                                ((Py_ssize_t)data[pos + 2] << 8) | (Py_ssize_t)data[pos + 3];
        const Py_ssize_t meta_start = pos + 4;
        if (size > end - meta_start) {
            break;
        }
        const Py_ssize_t meta_end = meta_start + size;
        single_t single;
        if (!parse_single(data, meta_start, meta_end, &single) || !single.has_payload_size ||
            single.payload_size < 0 || single.payload_size > end - meta_end) {
            break;
        }
        if (!single.has_sequence && base_sequence > UINT64_MAX - (uint64_t)index) {
            break;
        }
        const Py_ssize_t next = meta_end + single.payload_size;
        if (single.compacted) {
            pos = next;
            continue;
        }
        PyObject *key;
        if (single.key_start < 0) {
            key = Py_None;
            Py_INCREF(key);
        } else {
            int bad = 0;
            key = key_of(data, single.key_start, single.key_length, memo, &bad);
            if (key == NULL) {
                if (bad) {
                    break;
                }
                goto error;
            }
        }
        PyObject *value = PyBytes_FromStringAndSize((const char *)data + meta_end,
                                                    single.payload_size);
        if (value == NULL) {
            Py_DECREF(key);
            goto error;
        }
        PyObject *event_time;
        if (single.event_time == 0) {
            event_time = Py_None;
            Py_INCREF(event_time);
        } else {
            event_time = PyLong_FromUnsignedLongLong(single.event_time);
        }
        const uint64_t sequence =
            single.has_sequence ? single.sequence : (uint64_t)base_sequence + (uint64_t)index;
        if (append_new(values, value) < 0 || append_new(keys, key) < 0 ||
            append_new(event_times, event_time) < 0 ||
            append_new(sequence_ids, PyLong_FromUnsignedLongLong(sequence)) < 0 ||
            append_new(indexes, PyLong_FromSsize_t(index)) < 0) {
            goto error;
        }
        pos = next;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nn", index, pos);

error:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(payload, count, index, pos, base_sequence, key_memo, values, keys, event_times, "
     "sequence_ids, indexes) -> (index, pos): append the columns of messages index.. of a batch "
     "payload, stopping before the first one it does not decode cleanly (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_entry_columns",
    "A batch payload into column lists, compiled (braid.client.columns; ADR 0041).", -1, methods,
};

PyMODINIT_FUNC
PyInit__entry_columns(void)
{
    return PyModule_Create(&module_def);
}
