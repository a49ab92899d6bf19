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
 * dict the caller owns; cleared past 4096 entries).
 *
 * pack() decodes a whole batch payload of that shape straight into the buffers of Arrow arrays
 * (ADR 0072): the values and the keys each as one byte string with int32 end offsets (n + 1,
 * from 0), the keys' and event times' validity bitmaps (bit i set = row i not null, LSB first)
 * with their null counts, event times and sequence ids as int64, batch indexes as int32, the
 * rows' MessageId.to_bytes() (id_prefix - the entry's part - then the varints of batch index + 1
 * and of count, the batch size) as one byte string with int32 end offsets; all in the machine's
 * byte order (Arrow's native layout). A uint64 sequence id or event time of 2**63 and up is
 * stored as its two's complement (the int64 a Java long reads). No Python object per message.
 * It returns None, having built nothing the caller sees, when any message is not of the shape
 * decode() takes, or when the count cannot be right (more than one message per 4 bytes, or
 * offsets past int32): the caller then decodes the entry with the Python decoder. Tests hold
 * both functions against the Python decoder and the Message path.
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

/* -- pack(): a whole batch payload into Arrow-layout buffers ------------------------------- */

/* Whether data[0:length] is UTF-8 as Python's strict decoder accepts it (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
static int
valid_utf8(const unsigned char *s, Py_ssize_t length)
{
    Py_ssize_t i = 0;
    while (i < length) {
        const unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t need;
        unsigned char lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) {
                lo = 0xA0;
            } else if (c == 0xED) {
                hi = 0x9F;
            }
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) {
                lo = 0x90;
            } else if (c == 0xF4) {
                hi = 0x8F;
            }
        } else {
            return 0;
        }
        if (length - i <= need || s[i + 1] < lo || s[i + 1] > hi) {
            return 0;
        }
        for (Py_ssize_t k = 2; k <= need; k++) {
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) {
                return 0;
            }
        }
        i += need + 1;
    }
    return 1;
}

/* value as a protobuf varint at out (at most 10 bytes); its length */
static Py_ssize_t
write_varint(unsigned char *out, uint64_t value)
{
    Py_ssize_t n = 0;
    while (value >= 0x80) {
        out[n++] = (unsigned char)(value | 0x80);
        value >>= 7;
    }
    out[n++] = (unsigned char)value;
    return n;
}

static void
set_bit(unsigned char *bitmap, Py_ssize_t row)
{
    bitmap[row >> 3] |= (unsigned char)(1u << (row & 7));
}

static PyObject *
pack(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    unsigned long long base_sequence;
    const char *id_prefix;
    Py_ssize_t id_prefix_size;
    if (!PyArg_ParseTuple(args, "y*nKy#", &view, &count, &base_sequence, &id_prefix,
                          &id_prefix_size)) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    const Py_ssize_t end = view.len;
    /* Every message takes at least its 4-byte size: a larger count is damaged data, and the
     * bound keeps the allocations below proportional to the payload. */
    unsigned char size_varint[MAX_VARINT_BYTES + 1]; /* a message id's batch size */
    const Py_ssize_t size_varint_len = write_varint(size_varint, (uint64_t)(count < 0 ? 0 : count));
    /* a message id: the prefix, then uvarint(batch_index + 1) and uvarint(batch_size) */
    const Py_ssize_t id_max = id_prefix_size + MAX_VARINT_BYTES + 1 + size_varint_len;
    if (count < 0 || count > end / 4 || end > INT32_MAX || count > (INT32_MAX - 1) / id_max) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const Py_ssize_t bitmap_size = (count + 7) / 8;
    PyObject *values = PyBytes_FromStringAndSize(NULL, end);
    PyObject *value_offsets = PyBytes_FromStringAndSize(NULL, 4 * (count + 1));
    PyObject *keys = PyBytes_FromStringAndSize(NULL, end);
    PyObject *key_offsets = PyBytes_FromStringAndSize(NULL, 4 * (count + 1));
    PyObject *key_valid = PyBytes_FromStringAndSize(NULL, bitmap_size);
    PyObject *event_times = PyBytes_FromStringAndSize(NULL, 8 * count);
    PyObject *event_valid = PyBytes_FromStringAndSize(NULL, bitmap_size);
    PyObject *sequence_ids = PyBytes_FromStringAndSize(NULL, 8 * count);
    PyObject *indexes = PyBytes_FromStringAndSize(NULL, 4 * count);
    PyObject *ids = PyBytes_FromStringAndSize(NULL, id_max * count);
    PyObject *id_offsets = PyBytes_FromStringAndSize(NULL, 4 * (count + 1));
    PyObject *result = NULL;
    if (values == NULL || value_offsets == NULL || keys == NULL || key_offsets == NULL ||
        key_valid == NULL || event_times == NULL || event_valid == NULL || sequence_ids == NULL ||
        indexes == NULL || ids == NULL || id_offsets == NULL) {
        goto done;
    }
    char *value_out = PyBytes_AS_STRING(values);
    int32_t *value_ends = (int32_t *)PyBytes_AS_STRING(value_offsets);
    char *key_out = PyBytes_AS_STRING(keys);
    int32_t *key_ends = (int32_t *)PyBytes_AS_STRING(key_offsets);
    unsigned char *key_bits = (unsigned char *)PyBytes_AS_STRING(key_valid);
    int64_t *times = (int64_t *)PyBytes_AS_STRING(event_times);
    unsigned char *time_bits = (unsigned char *)PyBytes_AS_STRING(event_valid);
    int64_t *sequences = (int64_t *)PyBytes_AS_STRING(sequence_ids);
    int32_t *index_out = (int32_t *)PyBytes_AS_STRING(indexes);
    unsigned char *id_out = (unsigned char *)PyBytes_AS_STRING(ids);
    int32_t *id_ends = (int32_t *)PyBytes_AS_STRING(id_offsets);
    Py_ssize_t id_size = 0;
    id_ends[0] = 0;
    memset(key_bits, 0, bitmap_size);
    memset(time_bits, 0, bitmap_size);
    Py_ssize_t rows = 0, value_size = 0, key_size = 0, key_nulls = 0, time_nulls = 0;
    Py_ssize_t pos = 0;
    value_ends[0] = 0;
    key_ends[0] = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (end - pos < 4) {
            goto decline;
        }
        const Py_ssize_t size = ((Py_ssize_t)data[pos] << 24) | ((Py_ssize_t)data[pos + 1] << 16) |
                                ((Py_ssize_t)data[pos + 2] << 8) | (Py_ssize_t)data[pos + 3];
        const Py_ssize_t meta_start = pos + 4;
        if (size > end - meta_start) {
            goto decline;
        }
        const Py_ssize_t meta_end = meta_start + size;
        single_t single;
        if (!parse_single(data, meta_start, meta_end, &single) || !single.has_payload_size ||
            single.payload_size < 0 || single.payload_size > end - meta_end) {
            goto decline;
        }
        const uint64_t sequence =
            single.has_sequence ? single.sequence : (uint64_t)base_sequence + (uint64_t)index;
        if (!single.has_sequence && base_sequence > UINT64_MAX - (uint64_t)index) {
            goto decline;
        }
        pos = meta_end + single.payload_size;
        if (single.compacted) {
            continue;
        }
        if (single.key_start < 0) {
            key_nulls++;
        } else {
            if (!valid_utf8(data + single.key_start, single.key_length)) {
                goto decline;
            }
            memcpy(key_out + key_size, data + single.key_start, single.key_length);
            key_size += single.key_length;
            set_bit(key_bits, rows);
        }
        key_ends[rows + 1] = (int32_t)key_size;
        memcpy(value_out + value_size, data + meta_end, single.payload_size);
        value_size += single.payload_size;
        value_ends[rows + 1] = (int32_t)value_size;
        times[rows] = (int64_t)single.event_time;
        if (single.event_time == 0) {
            time_nulls++;
        } else {
            set_bit(time_bits, rows);
        }
        sequences[rows] = (int64_t)sequence;
        index_out[rows] = (int32_t)index;
        memcpy(id_out + id_size, id_prefix, id_prefix_size);
        id_size += id_prefix_size;
        id_size += write_varint(id_out + id_size, (uint64_t)index + 1);
        memcpy(id_out + id_size, size_varint, size_varint_len);
        id_size += size_varint_len;
        id_ends[rows + 1] = (int32_t)id_size;
        rows++;
    }
    if (_PyBytes_Resize(&values, value_size) < 0 || _PyBytes_Resize(&keys, key_size) < 0 ||
        _PyBytes_Resize(&ids, id_size) < 0) {
        goto done; /* the failed resize freed and cleared its object */
    }
    result = Py_BuildValue("nOOOOnOOnOOOOO", rows, values, value_offsets, keys, key_offsets,
                           key_nulls, key_valid, event_times, time_nulls, event_valid,
                           sequence_ids, indexes, ids, id_offsets);
    goto done;
decline:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(values);
    Py_XDECREF(value_offsets);
    Py_XDECREF(keys);
    Py_XDECREF(key_offsets);
    Py_XDECREF(key_valid);
    Py_XDECREF(event_times);
    Py_XDECREF(event_valid);
    Py_XDECREF(sequence_ids);
    Py_XDECREF(indexes);
    Py_XDECREF(ids);
    Py_XDECREF(id_offsets);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(payload, count, index, pos, base_sequence, key_memo, values, keys, event_times, "
     "sequence_ids, indexes) -> (index, pos): append the columns of messages index.. of a batch "
     "payload, stopping before the first one it does not decode cleanly (see the module)."},
    {"pack", pack, METH_VARARGS,
     "pack(payload, count, base_sequence, id_prefix) -> (rows, values, "
     "value_offsets, keys, key_offsets, key_nulls, key_validity, event_times, event_time_nulls, "
     "event_time_validity, sequence_ids, batch_indexes, message_ids, message_id_offsets) or None: every message of a batch payload as Arrow-layout "
     "buffers, or None when any message is not of the shape decode() handles (see the module)."},
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
