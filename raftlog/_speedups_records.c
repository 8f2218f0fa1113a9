/*
 * raftlog._speedups_records: compiled twins of the per-entry loops over the entry layout.
 *
 * Why this exists: issue #28 found the interpreter to be most of a peer's CPU, and these
 * loops run once per entry on every append (put_entries: three sealed records), on every
 * range read (take_payloads: the stored CRC check of each record) and on every entry a
 * follower or a reader receives (parse_entries: LogEntry.from_bytes of each frame). Their
 * pure-Python twins in raftlog/storage/_records.py and raftlog/entry.py are the definition;
 * this file must produce the same records, entries, results and errors
 * (tests/unit/storage/test_speedups.py compares both on generated inputs, corrupt records
 * included). raftlog/speedups.py decides which one runs: this module is optional, and a
 * machine without a C compiler runs the pure twins.
 *
 * Record layout (raftlog/storage/_records.py; the entry itself: docs/protocol.md §4.1):
 *   b"e" + index (8 BE)       -> CRC32(key, body) (4 BE) + serialized entry
 *   b"r" + request id (12)    -> CRC32(key, body) (4 BE) + index (8 BE)
 *   b"x" + index (8 BE)       -> CRC32(key, body) (4 BE) + request id (12)
 * The CRC is zlib's CRC-32 (IEEE 802.3, reflected, init and final xor 0xFFFFFFFF), over the
 * key's bytes and then the body's, so it equals zlib.crc32(body, zlib.crc32(key)).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#define CRC_SIZE 4
#define INDEX_SIZE 8
#define REQUEST_ID_SIZE 12
#define ENTRY_HEADER_SIZE 20

/* Slicing-by-8 tables for the reflected polynomial 0xEDB88320, filled once at import. */
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
}

/* zlib.crc32(data, crc): continue a CRC over more bytes (crc is a finished CRC value). */
static uint32_t crc_update(uint32_t crc, const unsigned char *p, Py_ssize_t len) {
    uint32_t c = crc ^ 0xFFFFFFFFu;
    while (len >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len-- > 0) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

static void put_be64(unsigned char *out, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        out[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static void put_be32(unsigned char *out, uint32_t v) {
    out[0] = (unsigned char)(v >> 24);
    out[1] = (unsigned char)(v >> 16);
    out[2] = (unsigned char)(v >> 8);
    out[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static const unsigned char ENTRY_PREFIX = 'e';
static const unsigned char REQUEST_PREFIX = 'r';
static const unsigned char BY_INDEX_PREFIX = 'x';
static uint32_t entry_prefix_crc, request_prefix_crc, by_index_prefix_crc;
static PyObject *str_to_bytes, *str_request_id, *str_raw;

/* An index from Python: a non-negative int that fits in 64 bits, as in int.to_bytes(8). */
static int index_arg(PyObject *obj, uint64_t *out) {
    if (!PyLong_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "index must be an int");
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_SetString(PyExc_OverflowError, "index does not fit in 8 bytes");
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* Call put(key, value[, family]) with two new bytes objects built from the given parts;
 * `family` NULL: two arguments (the default column family). */
static int put_record(PyObject *put, unsigned char prefix, const unsigned char *key_body,
                      Py_ssize_t key_len, uint32_t prefix_crc, const char *body,
                      Py_ssize_t body_len, PyObject *family) {
    PyObject *key = PyBytes_FromStringAndSize(NULL, 1 + key_len);
    if (key == NULL) {
        return -1;
    }
    unsigned char *k = (unsigned char *)PyBytes_AS_STRING(key);
    k[0] = prefix;
    memcpy(k + 1, key_body, (size_t)key_len);
    PyObject *value = PyBytes_FromStringAndSize(NULL, CRC_SIZE + body_len);
    if (value == NULL) {
        Py_DECREF(key);
        return -1;
    }
    unsigned char *v = (unsigned char *)PyBytes_AS_STRING(value);
    uint32_t crc = crc_update(crc_update(prefix_crc, key_body, key_len),
                              (const unsigned char *)body, body_len);
    put_be32(v, crc);
    memcpy(v + CRC_SIZE, body, (size_t)body_len);
    PyObject *args[3] = {key, value, family};
    PyObject *res = PyObject_Vectorcall(put, args, family == NULL ? 2 : 3, NULL);
    Py_DECREF(key);
    Py_DECREF(value);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

/* Whether the 12 bytes at `r` are the zero request id (checkpoints and configurations: never
 * indexed, never admitted). */
static int is_zero_id(const unsigned char *r) {
    int zero = 1;
    for (int i = 0; i < REQUEST_ID_SIZE; i++) {
        zero &= r[i] == 0;
    }
    return zero;
}

/* An entry's serialized bytes: its cached `_raw` (what parse_entries and decide_batch set,
 * read without a Python call), else entry.to_bytes(). A new reference, or NULL with the error
 * set. */
static PyObject *entry_bytes(PyObject *entry) {
    PyObject *raw = PyObject_GetAttr(entry, str_raw);
    if (raw != NULL && PyBytes_CheckExact(raw)) {
        return raw;
    }
    if (raw == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return NULL;
        }
        PyErr_Clear();
    } else {
        Py_DECREF(raw);
    }
    PyObject *payload = PyObject_CallMethodNoArgs(entry, str_to_bytes);
    if (payload != NULL && !PyBytes_Check(payload)) {
        Py_DECREF(payload);
        PyErr_SetString(PyExc_TypeError, "entry.to_bytes() must return bytes");
        return NULL;
    }
    return payload;
}

static int put_entry_record(PyObject *put, uint64_t index, PyObject *entry) {
    unsigned char packed_index[INDEX_SIZE];
    put_be64(packed_index, index);
    PyObject *payload = entry_bytes(entry);
    if (payload == NULL) {
        return -1;
    }
    int rc = put_record(put, ENTRY_PREFIX, packed_index, INDEX_SIZE, entry_prefix_crc,
                        PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload), NULL);
    Py_DECREF(payload);
    return rc;
}

/* entry.request_id, checked to be 12 bytes: a new reference, or NULL with the error set. */
static PyObject *request_id_of(PyObject *entry) {
    PyObject *rid = PyObject_GetAttr(entry, str_request_id);
    if (rid != NULL && (!PyBytes_Check(rid) || PyBytes_GET_SIZE(rid) != REQUEST_ID_SIZE)) {
        Py_DECREF(rid);
        PyErr_SetString(PyExc_TypeError, "entry.request_id must be 12 bytes");
        return NULL;
    }
    return rid;
}

/* The by-index mirror (by_index) or the request-id record of the entry at `index`, into
 * `family`; nothing for the zero id. */
static int put_id_record(PyObject *put, int by_index, uint64_t index, PyObject *entry,
                         PyObject *family) {
    PyObject *rid = request_id_of(entry);
    if (rid == NULL) {
        return -1;
    }
    const unsigned char *r = (const unsigned char *)PyBytes_AS_STRING(rid);
    unsigned char packed_index[INDEX_SIZE];
    put_be64(packed_index, index);
    int rc = 0;
    if (!is_zero_id(r)) {
        rc = by_index ? put_record(put, BY_INDEX_PREFIX, packed_index, INDEX_SIZE,
                                   by_index_prefix_crc, (const char *)r, REQUEST_ID_SIZE, family)
                      : put_record(put, REQUEST_PREFIX, r, REQUEST_ID_SIZE, request_prefix_crc,
                                   (const char *)packed_index, INDEX_SIZE, family);
    }
    Py_DECREF(rid);
    return rc;
}

/* One run of put_entries: run 0 the entry records (each request id checked on the way, so a
 * bad one fails before any id record is queued), 1 the by-index mirrors, 2 the request ids. */
static int put_run(PyObject *put, int run, uint64_t first, PyObject *seq, PyObject *family) {
    uint64_t index = first;
    /* the size is read again each time and the item held: put() is Python code */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++, index++) {
        PyObject *entry = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        int rc;
        if (run == 0) {
            rc = put_entry_record(put, index, entry);
            PyObject *rid = rc < 0 ? NULL : request_id_of(entry);
            rc = rid == NULL ? -1 : 0;
            Py_XDECREF(rid);
        } else {
            rc = put_id_record(put, run == 1, index, entry, family);
        }
        Py_DECREF(entry);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(put_entries_doc,
"put_entries(put, first_index, entries, mirrors, requests)\n--\n\n"
"Call put(key, value) for the sealed records of entries from first_index, then for each\n"
"non-zero request id put(key, value, mirrors) for its by-index mirror, then\n"
"put(key, value, requests) for its request-id record, each run in entry order (the memtable\n"
"inserts keys that follow each other cheaply). The twin of\n"
"raftlog.storage._records.put_entries_py, taking the batch's bound put method.");

static PyObject *put_entries(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "put_entries(put, first_index, entries, mirrors, requests)");
        return NULL;
    }
    uint64_t index;
    if (index_arg(args[1], &index) < 0) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[2], "entries must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *families[3] = {NULL, args[3], args[4]};
    for (int run = 0; run < 3; run++) {
        if (put_run(args[0], run, index, seq, families[run]) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* 1: the stored record checks out; 0: it does not (wrong CRC, too short). */
static int entry_record_ok(uint64_t index, const unsigned char *value, Py_ssize_t len) {
    if (len <= CRC_SIZE + ENTRY_HEADER_SIZE) {
        return 0;
    }
    unsigned char packed_index[INDEX_SIZE];
    put_be64(packed_index, index);
    uint32_t crc = crc_update(crc_update(entry_prefix_crc, packed_index, INDEX_SIZE),
                              value + CRC_SIZE, len - CRC_SIZE);
    return crc == get_be32(value);
}

/* A bad record: on_bad(index, value) raises the precise error (entry_payload). */
static PyObject *report_bad(PyObject *on_bad, uint64_t index, PyObject *value) {
    PyObject *py_index = PyLong_FromUnsignedLongLong(index);
    if (py_index == NULL) {
        return NULL;
    }
    PyObject *res = PyObject_CallFunctionObjArgs(on_bad, py_index, value, NULL);
    Py_DECREF(py_index);
    if (res != NULL) {
        Py_DECREF(res);
        PyErr_Format(PyExc_RuntimeError, "entry %llu failed its check but on_bad did not raise",
                     (unsigned long long)index);
    }
    return NULL;
}

/* Take verified bodies from `it` into `out`; 1 if max_bytes stopped it, 0 at the end. */
static int take_into(PyObject *it, PyObject *out, uint64_t index, int limited,
                     long long max_bytes, PyObject *on_bad) {
    long long total = 0;
    PyObject *value;
    while ((value = PyIter_Next(it)) != NULL) {
        if (!PyBytes_Check(value)) {
            Py_DECREF(value);
            PyErr_SetString(PyExc_TypeError, "stored values must be bytes");
            return -1;
        }
        const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(value);
        Py_ssize_t len = PyBytes_GET_SIZE(value);
        if (!entry_record_ok(index, raw, len)) {
            report_bad(on_bad, index, value);
            Py_DECREF(value);
            return -1;
        }
        total += len - CRC_SIZE;
        if (limited && total > max_bytes && PyList_GET_SIZE(out) > 0) {
            Py_DECREF(value);
            return 1;
        }
        PyObject *body = PyBytes_FromStringAndSize((const char *)raw + CRC_SIZE, len - CRC_SIZE);
        Py_DECREF(value);
        if (body == NULL || PyList_Append(out, body) < 0) {
            Py_XDECREF(body);
            return -1;
        }
        Py_DECREF(body);
        index++;
    }
    return PyErr_Occurred() ? -1 : 0;
}

PyDoc_STRVAR(take_payloads_doc,
"take_payloads(values, first_index, max_bytes, on_bad)\n--\n\n"
"Verified entry bodies from consecutive stored values starting at first_index, stopping\n"
"before the entry that would pass max_bytes (at least one is taken); returns (bodies,\n"
"limited). A record that fails its check is handed to on_bad(index, value), which raises.\n"
"The twin of raftlog.storage._records.take_payloads_py.");

static PyObject *take_payloads(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "take_payloads(values, first_index, max_bytes, on_bad)");
        return NULL;
    }
    uint64_t index;
    if (index_arg(args[1], &index) < 0) {
        return NULL;
    }
    int limited = args[2] != Py_None;
    long long max_bytes = 0;
    if (limited) {
        /* beyond 64 bits, as the pure twin's comparison: above never stops it, below always */
        int overflow;
        max_bytes = PyLong_AsLongLongAndOverflow(args[2], &overflow);
        if (max_bytes == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (overflow > 0) {
            limited = 0;
        } else if (overflow < 0) {
            max_bytes = LLONG_MIN;
        }
    }
    PyObject *it = PyObject_GetIter(args[0]);
    if (it == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    int stopped = take_into(it, out, index, limited, max_bytes, args[3]);
    Py_DECREF(it);
    if (stopped < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(NO)", out, stopped ? Py_True : Py_False);
}

static PyObject *str_entry_type, *str_term, *str_data; /* with str_request_id, str_raw */

/* A new instance of the slots class `cls` (object.__new__) with the five slots of a LogEntry
 * -- request_id, entry_type, term, data, _raw -- set to `values` as object.__setattr__ does
 * (bypassing a frozen dataclass's __setattr__). A NULL value is a failure whose error is
 * already set. The values are borrowed. */
static PyObject *entry_with(PyTypeObject *cls, PyObject *const values[5]) {
    PyObject *names[5] = {str_request_id, str_entry_type, str_term, str_data, str_raw};
    for (int i = 0; i < 5; i++) {
        if (values[i] == NULL) {
            return NULL;
        }
    }
    PyObject *entry = cls->tp_alloc(cls, 0);
    for (int i = 0; entry != NULL && i < 5; i++) {
        if (PyObject_GenericSetAttr(entry, names[i], values[i]) < 0) {
            Py_CLEAR(entry);
        }
    }
    return entry;
}

/* A new instance of the slots class `cls` parsed from `frame` (entry_with). */
static PyObject *entry_from_frame(PyTypeObject *cls, PyObject *frame, PyObject *error_type) {
    PyObject *raw;
    if (PyBytes_CheckExact(frame)) {
        raw = Py_NewRef(frame);
    } else if ((raw = PyBytes_FromObject(frame)) == NULL) {
        return NULL;
    }
    Py_ssize_t len = PyBytes_GET_SIZE(raw);
    if (len <= ENTRY_HEADER_SIZE) {
        Py_DECREF(raw);
        PyErr_Format(error_type, "entry of %zd bytes is too short", len);
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    uint64_t term = 0;
    for (int i = ENTRY_HEADER_SIZE - 1; i >= REQUEST_ID_SIZE + 1; i--) {
        term = term << 8 | p[i];
    }
    PyObject *values[5] = {
        PyBytes_FromStringAndSize((const char *)p, REQUEST_ID_SIZE),
        PyLong_FromLong(p[REQUEST_ID_SIZE]),
        PyLong_FromUnsignedLongLong(term),
        PyBytes_FromStringAndSize((const char *)p + ENTRY_HEADER_SIZE, len - ENTRY_HEADER_SIZE),
        raw,
    };
    PyObject *entry = entry_with(cls, values);
    for (int i = 0; i < 5; i++) {
        Py_XDECREF(values[i]);
    }
    return entry;
}

PyDoc_STRVAR(parse_entries_doc,
"parse_entries(cls, frames, error_type)\n--\n\n"
"A tuple of cls (LogEntry) parsed from the serialized entries in frames, as\n"
"cls.from_bytes each; error_type (EntryFormatError) for a frame too short to hold one. The\n"
"twin of raftlog.entry.parse_entries_py.");

static PyObject *parse_entries(PyObject *Py_UNUSED(self), PyObject *const *args,
                               Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "parse_entries(cls, frames, error_type)");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[1], "frames must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        /* a bytes-like frame other than bytes runs its own code: hold it, check the size */
        if (i >= PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "frames changed size while parsed");
            Py_CLEAR(out);
            break;
        }
        PyObject *frame = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *entry = entry_from_frame((PyTypeObject *)args[0], frame, args[2]);
        Py_DECREF(frame);
        if (entry == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, entry);
    }
    Py_DECREF(seq);
    return out;
}

/* --- a proposal batch (raftlog.consensus.batch) ------------------------------------------- */

static PyObject *str_index; /* Appended's one field */

#define MAX_ENTRY_TERM ((((uint64_t)1) << 56) - 1)

/* Whether every request is a (bytes, bytes) tuple and every known index an int or None: the
 * compiled loop handles these only, and checks before it calls prepare (side effects). */
static int batch_is_plain(PyObject *requests, PyObject *known) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(requests);
    if (PySequence_Fast_GET_SIZE(known) != n) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(requests, i);
        PyObject *at = PySequence_Fast_GET_ITEM(known, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1)) ||
            (at != Py_None && !PyLong_CheckExact(at))) {
            return 0;
        }
    }
    return 1;
}

/* FreshWindow.admits: a 12-byte id other than the zero id, its timestamp (bytes 0-3, big
 * endian, seconds) within [low_ms, high_ms] unless there is no window. */
static int id_admitted(PyObject *rid, int windowed, long long low_ms, long long high_ms) {
    if (PyBytes_GET_SIZE(rid) != REQUEST_ID_SIZE) {
        return 0;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(rid);
    if (is_zero_id(p)) {
        return 0;
    }
    if (!windowed) {
        return 1;
    }
    long long t = (long long)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                              (uint32_t)p[2] << 8 | (uint32_t)p[3]) * 1000;
    return low_ms <= t && t <= high_ms;
}

/* A Python int as a long long, saturated at the ends (the window's edges may be any int). */
static int clamped(PyObject *value, long long *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = overflow > 0 ? LLONG_MAX : overflow < 0 ? LLONG_MIN : v;
    return 0;
}

/* A new instance of the slots class `cls` with `name` set (object.__new__ + setattr, as a
 * frozen dataclass's own __init__ does). */
static PyObject *new_with(PyTypeObject *cls, PyObject *name, PyObject *value) {
    PyObject *made = cls->tp_alloc(cls, 0);
    if (made != NULL && PyObject_GenericSetAttr(made, name, value) < 0) {
        Py_CLEAR(made);
    }
    return made;
}

/* LogEntry.states(term, pairs) when every prepared data is bytes; else the Python one. */
static PyObject *build_states(PyObject *const *kit, PyObject *term, PyObject *pairs) {
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, i), 1))) {
            return PyObject_CallFunctionObjArgs(kit[2], term, pairs, NULL);
        }
    }
    int overflow = 0;
    long long t = PyLong_AsLongLongAndOverflow(term, &overflow);
    if (t == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow != 0 || t < 0 || (uint64_t)t > MAX_ENTRY_TERM) {
        PyErr_Format(kit[7], "term %S does not fit in 7 bytes", term);
        return NULL;
    }
    unsigned char header_tail[8];
    header_tail[0] = (unsigned char)PyLong_AsLong(kit[1]);
    for (int i = 0; i < 7; i++) {
        header_tail[1 + i] = (unsigned char)((uint64_t)t >> (8 * i));
    }
    PyObject *entries = PyList_New(n);
    for (Py_ssize_t i = 0; entries != NULL && i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        PyObject *rid = PyTuple_GET_ITEM(pair, 0), *data = PyTuple_GET_ITEM(pair, 1);
        Py_ssize_t size = PyBytes_GET_SIZE(data);
        if (PyBytes_GET_SIZE(rid) != REQUEST_ID_SIZE) { /* admitted ids have the size */
            PyErr_Format(kit[7], "request id must be %d bytes", REQUEST_ID_SIZE);
            Py_CLEAR(entries);
            break;
        }
        if (size == 0) {
            PyErr_SetString(kit[7], "entry data must hold at least one byte");
            Py_CLEAR(entries);
            break;
        }
        PyObject *raw = PyBytes_FromStringAndSize(NULL, ENTRY_HEADER_SIZE + size);
        if (raw != NULL) {
            char *q = PyBytes_AS_STRING(raw);
            memcpy(q, PyBytes_AS_STRING(rid), REQUEST_ID_SIZE);
            memcpy(q + REQUEST_ID_SIZE, header_tail, 8);
            memcpy(q + ENTRY_HEADER_SIZE, PyBytes_AS_STRING(data), (size_t)size);
        }
        PyObject *values[5] = {rid, kit[1], term, data, raw};
        PyObject *entry = entry_with((PyTypeObject *)kit[0], values);
        Py_XDECREF(raw);
        if (entry == NULL) {
            Py_CLEAR(entries);
            break;
        }
        PyList_SET_ITEM(entries, i, entry);
    }
    return entries;
}

/* One request of the loop: its result (a new reference), or NULL with an error set. */
static PyObject *decide_one(PyObject *const *kit, PyObject *item, PyObject *known_at,
                            PyObject *prepare, PyObject *in_batch, PyObject *pairs,
                            long long *next_index, const long long *window) {
    PyObject *rid = PyTuple_GET_ITEM(item, 0), *data = PyTuple_GET_ITEM(item, 1);
    PyObject *index = known_at;
    if (index == Py_None && (index = PyDict_GetItemWithError(in_batch, rid)) == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        index = Py_None;
    }
    if (index != Py_None) {
        return PyObject_CallOneArg(kit[4], index); /* Duplicate(index) */
    }
    PyObject *prepared = prepare == Py_None ? Py_NewRef(data) : PyObject_CallOneArg(prepare, data);
    if (prepared == NULL) {
        return NULL;
    }
    if (PyObject_TypeCheck(prepared, (PyTypeObject *)PyExc_Exception)) {
        PyObject *refused = PyObject_CallOneArg(kit[5], prepared); /* Refused(reason) */
        Py_DECREF(prepared);
        return refused;
    }
    if (!id_admitted(rid, window[0] != 0, window[1], window[2])) {
        Py_DECREF(prepared);
        return PyObject_CallNoArgs(kit[6]); /* Expired() */
    }
    PyObject *pair = PyTuple_Pack(2, rid, prepared);
    Py_DECREF(prepared);
    PyObject *at = PyLong_FromLongLong(*next_index);
    PyObject *result = NULL;
    if (pair != NULL && at != NULL && PyList_Append(pairs, pair) == 0 &&
        PyDict_SetItem(in_batch, rid, at) == 0) {
        result = new_with((PyTypeObject *)kit[3], str_index, at); /* Appended(index) */
        *next_index += 1;
    }
    Py_XDECREF(pair);
    Py_XDECREF(at);
    return result;
}

PyDoc_STRVAR(decide_batch_doc,
"decide_batch(requests, known, prepare, low_ms, high_ms, term, next_index, kit)\n--\n\n"
"(entries, results) as raftlog.consensus.batch.decide_batch_py decides them, with the\n"
"FreshWindow's edges given; None when a request is not a (bytes, bytes) tuple or a known\n"
"index not an int or None (the caller runs the pure twin then). kit = (LogEntry,\n"
"EntryType.STATE, LogEntry.states, Appended, Duplicate, Refused, Expired, EntryFormatError).");

static PyObject *decide_batch(PyObject *Py_UNUSED(self), PyObject *const *args,
                              Py_ssize_t nargs) {
    if (nargs != 8 || !PyTuple_CheckExact(args[7]) || PyTuple_GET_SIZE(args[7]) != 8 ||
        !PyLong_Check(args[5]) || !PyLong_Check(args[6]) ||
        (args[3] != Py_None && !PyLong_Check(args[3])) || !PyLong_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "decide_batch(requests, known, prepare, low_ms, high_ms, term, "
                        "next_index, kit)");
        return NULL;
    }
    PyObject *const *kit = &PyTuple_GET_ITEM(args[7], 0);
    for (int k = 0; k < 8; k++) {
        if (k != 1 && k != 2 && !PyType_Check(kit[k])) {
            PyErr_SetString(PyExc_TypeError, "decide_batch: kit holds the wrong objects");
            return NULL;
        }
    }
    long long window[3] = {args[3] != Py_None, 0, 0}, next_index = 0;
    if ((window[0] && clamped(args[3], &window[1]) < 0) || clamped(args[4], &window[2]) < 0 ||
        clamped(args[6], &next_index) < 0) {
        return NULL;
    }
    /* copies: prepare may run any code, even code that changes the caller's lists */
    PyObject *requests = PySequence_Tuple(args[0]);
    PyObject *known = requests == NULL ? NULL : PySequence_Tuple(args[1]);
    if (known == NULL || !batch_is_plain(requests, known)) {
        Py_XDECREF(requests);
        Py_XDECREF(known);
        return known == NULL && PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(requests);
    PyObject *in_batch = PyDict_New(), *pairs = PyList_New(0), *results = PyList_New(n);
    PyObject *out = NULL;
    int failed = in_batch == NULL || pairs == NULL || results == NULL;
    for (Py_ssize_t i = 0; !failed && i < n; i++) {
        PyObject *result = decide_one(kit, PySequence_Fast_GET_ITEM(requests, i),
                                      PySequence_Fast_GET_ITEM(known, i), args[2], in_batch,
                                      pairs, &next_index, window);
        failed = result == NULL;
        if (!failed) {
            PyList_SET_ITEM(results, i, result);
        }
    }
    if (!failed) {
        PyObject *entries = build_states(kit, args[5], pairs);
        if (entries != NULL) {
            out = PyTuple_Pack(2, entries, results);
            Py_DECREF(entries);
        }
    }
    Py_XDECREF(in_batch);
    Py_XDECREF(pairs);
    Py_XDECREF(results);
    Py_DECREF(requests);
    Py_DECREF(known);
    return out;
}

PyDoc_STRVAR(crc32_doc,
"crc32(data, value=0)\n--\n\n"
"zlib.crc32 computed by this module's own tables: the tests check it against zlib, which\n"
"is the definition every stored record is checked by.");

static PyObject *crc32(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32(data, value=0)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t start = 0;
    if (nargs == 2) {
        unsigned long v = PyLong_AsUnsignedLongMask(args[1]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
        start = (uint32_t)v;
    }
    uint32_t crc = crc_update(start, (const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

PyDoc_STRVAR(entries_bytes_doc,
"entries_bytes(entries)\n--\n\n"
"[entry.to_bytes() for entry in entries], reading each entry's cached bytes without a call:\n"
"the twin of raftlog.entry.entries_bytes_py.");

static PyObject *entries_bytes(PyObject *Py_UNUSED(self), PyObject *entries) {
    PyObject *seq = PySequence_Fast(entries, "entries must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (count != PySequence_Fast_GET_SIZE(seq)) { /* a to_bytes() changed the list */
            PyErr_SetString(PyExc_RuntimeError, "entries changed size while serialized");
            Py_DECREF(out);
            Py_DECREF(seq);
            return NULL;
        }
        PyObject *entry = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *payload = entry_bytes(entry);
        Py_DECREF(entry);
        if (payload == NULL) {
            Py_DECREF(out);
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SET_ITEM(out, i, payload);
    }
    Py_DECREF(seq);
    return out;
}

static PyMethodDef methods[] = {
    {"put_entries", (PyCFunction)(void (*)(void))put_entries, METH_FASTCALL, put_entries_doc},
    {"take_payloads", (PyCFunction)(void (*)(void))take_payloads, METH_FASTCALL,
     take_payloads_doc},
    {"parse_entries", (PyCFunction)(void (*)(void))parse_entries, METH_FASTCALL,
     parse_entries_doc},
    {"decide_batch", (PyCFunction)(void (*)(void))decide_batch, METH_FASTCALL,
     decide_batch_doc},
    {"entries_bytes", entries_bytes, METH_O, entries_bytes_doc},
    {"crc32", (PyCFunction)(void (*)(void))crc32, METH_FASTCALL, crc32_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "raftlog._speedups_records",
    "Compiled twins of the storage layer's per-entry loops (raftlog.speedups chooses).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups_records(void) {
    crc_init();
    entry_prefix_crc = crc_update(0, &ENTRY_PREFIX, 1);
    request_prefix_crc = crc_update(0, &REQUEST_PREFIX, 1);
    by_index_prefix_crc = crc_update(0, &BY_INDEX_PREFIX, 1);
    str_to_bytes = PyUnicode_InternFromString("to_bytes");
    str_request_id = PyUnicode_InternFromString("request_id");
    str_entry_type = PyUnicode_InternFromString("entry_type");
    str_term = PyUnicode_InternFromString("term");
    str_data = PyUnicode_InternFromString("data");
    str_raw = PyUnicode_InternFromString("_raw");
    str_index = PyUnicode_InternFromString("index");
    if (str_index == NULL || str_to_bytes == NULL || str_request_id == NULL ||
        str_entry_type == NULL || str_term == NULL || str_data == NULL || str_raw == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
