/*
 * raftlog._speedups_transport: compiled twins of raftlog/transport.py's multipart send and
 * receive.
 *
 * Why this exists: issue #28 found the interpreter to be most of a peer's CPU, and every
 * message a peer handles passes through these functions frame by frame. Receiving through
 * pyzmq costs ~1 us per frame (a Frame object, then its bytes); a RequestUpdate has six
 * frames and an AppendEntries one per entry. Here each frame goes from libzmq straight into a
 * bytes object. send_update_dones answers a run of committed updates in one call (a leader
 * sends one answer per update). The pure-Python twins in raftlog/transport.py are the
 * definition: same frames, same errors (zmq.Again when nothing is queued or the high-water
 * mark is reached), same limits (tests/unit/test_transport_twins.py runs both on real
 * sockets).
 *
 * libzmq is the copy pyzmq already loaded: bind() is given the path of pyzmq's own extension
 * module, opens it with RTLD_NOLOAD (so nothing new is loaded) and looks the functions up
 * through it, which searches its dependencies, libzmq among them. Sockets are passed as
 * pyzmq's `underlying` address; a closed pyzmq socket has a NULL handle, which libzmq
 * answers with ENOTSOCK, never a crash. Every call here is non-blocking.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* zmq.h's message type: 64 opaque bytes, pointer-aligned (libzmq 4.x). */
typedef struct {
    unsigned char _[64];
} __attribute__((aligned(sizeof(void *)))) zmq_msg_t;

#define ZMQ_NOBLOCK 1
#define ZMQ_SNDMORE 2
#define ZMQ_SRCFD 2

static int (*z_msg_init)(zmq_msg_t *);
static int (*z_msg_recv)(zmq_msg_t *, void *, int);
static int (*z_msg_close)(zmq_msg_t *);
static void *(*z_msg_data)(zmq_msg_t *);
static size_t (*z_msg_size)(const zmq_msg_t *);
static int (*z_msg_more)(const zmq_msg_t *);
static const char *(*z_msg_gets)(const zmq_msg_t *, const char *);
static int (*z_msg_get)(const zmq_msg_t *, int);
static int (*z_send)(void *, const void *, size_t, int);
static int (*z_errno)(void);

static PyObject *again_instance; /* a zmq.Again raised for EAGAIN, traceback reset each time */
static PyObject *zmq_error_type; /* zmq.ZMQError, called with the errno for anything else */
static int bound;

#define LOOKUP(var, name)                                  \
    do {                                                   \
        *(void **)(&(var)) = dlsym(handle, name);          \
        if ((var) == NULL) {                               \
            return PyErr_Format(PyExc_ImportError,         \
                                "libzmq has no %s", name); \
        }                                                  \
    } while (0)

PyDoc_STRVAR(bind_doc,
"bind(pyzmq_extension_path, again, zmq_error)\n--\n\n"
"Find libzmq's functions through pyzmq's loaded extension module; `again` is the zmq.Again\n"
"instance raised when nothing is queued, `zmq_error` the class raised for other errors.");

static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *args) {
    const char *path;
    PyObject *again, *error_type;
    if (!PyArg_ParseTuple(args, "sOO", &path, &again, &error_type)) {
        return NULL;
    }
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) {
        return PyErr_Format(PyExc_ImportError, "pyzmq's extension is not loaded: %s", path);
    }
    LOOKUP(z_msg_init, "zmq_msg_init");
    LOOKUP(z_msg_recv, "zmq_msg_recv");
    LOOKUP(z_msg_close, "zmq_msg_close");
    LOOKUP(z_msg_data, "zmq_msg_data");
    LOOKUP(z_msg_size, "zmq_msg_size");
    LOOKUP(z_msg_more, "zmq_msg_more");
    LOOKUP(z_msg_gets, "zmq_msg_gets");
    LOOKUP(z_msg_get, "zmq_msg_get");
    LOOKUP(z_send, "zmq_send");
    LOOKUP(z_errno, "zmq_errno");
    /* the handle stays open: pyzmq keeps the library loaded for the life of the process */
    Py_XSETREF(again_instance, Py_NewRef(again));
    Py_XSETREF(zmq_error_type, Py_NewRef(error_type));
    bound = 1;
    Py_RETURN_NONE;
}

/* Set the Python error for a failed libzmq call (errno `err`); always returns NULL. */
static PyObject *raise_zmq(int err) {
    if (err == EAGAIN) {
        PyException_SetTraceback(again_instance, Py_None);
        PyException_SetContext(again_instance, NULL);
        PyErr_SetObject((PyObject *)Py_TYPE(again_instance), again_instance);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunction(zmq_error_type, "i", err);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* A socket argument: pyzmq's `underlying` address, as an int. */
static int socket_arg(PyObject *obj, void **out) {
    void *p = PyLong_AsVoidPtr(obj);
    if (p == NULL && PyErr_Occurred()) {
        return -1;
    }
    *out = p;
    return 0;
}

static int not_bound(void) {
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "raftlog._speedups_transport.bind() was not called");
        return 1;
    }
    return 0;
}

/* The socket of a call taking `want` arguments, the first a socket address: 0, or -1 with
 * the error set (a wrong count is a TypeError that shows `usage`). */
static int socket_of(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                     const char *usage, void **sock) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %s", usage);
        return -1;
    }
    return not_bound() ? -1 : socket_arg(args[0], sock);
}

/* Receive one frame into msg, retrying after a signal; 0 or the errno. */
static int recv_part(void *sock, zmq_msg_t *msg) {
    for (;;) {
        if (z_msg_recv(msg, sock, ZMQ_NOBLOCK) >= 0) {
            return 0;
        }
        int err = z_errno();
        if (err != EINTR) {
            return err;
        }
        if (PyErr_CheckSignals() < 0) {
            return -1;
        }
    }
}

static PyObject *msg_bytes(zmq_msg_t *msg) {
    return PyBytes_FromStringAndSize((const char *)z_msg_data(msg), (Py_ssize_t)z_msg_size(msg));
}

/* Fail a receive after `err` (from recv_part): -1 means a Python error is already set. */
static PyObject *recv_failed(int err) {
    return err < 0 ? NULL : raise_zmq(err);
}

/* The first frame of the next message into a fresh `msg`: 0, or -1 with the error set
 * (zmq.Again when none is queued) and `msg` closed. */
static int recv_first(void *sock, zmq_msg_t *msg) {
    z_msg_init(msg);
    int err = recv_part(sock, msg);
    if (err != 0) {
        z_msg_close(msg);
        recv_failed(err);
        return -1;
    }
    return 0;
}

/* The rest of a message after its first frame was taken: discard every frame. */
static void drain_rest(void *sock, zmq_msg_t *msg, long long *total, Py_ssize_t *count) {
    while (z_msg_more(msg)) {
        z_msg_close(msg);
        z_msg_init(msg);
        if (recv_part(sock, msg) != 0) {
            PyErr_Clear(); /* a signal or an error mid-message: the message is gone anyway */
            return;
        }
        *total += (long long)z_msg_size(msg);
        *count += 1;
    }
}

/* The frames of a message whose first frame is in `msg`, appended to `parts` (NULL: a failed
 * allocation before, reported here). Frames after the first add up in *total and *count;
 * once *total passes `limit` the rest is discarded and *too_large set. `msg` is
 * closed. 0, or -1 with a Python error set, the socket left at a message boundary. */
static int take_message(void *sock, zmq_msg_t *msg, PyObject *parts, long long limit,
                        long long *total, Py_ssize_t *count, int *too_large) {
    for (;;) {
        PyObject *data = parts == NULL ? NULL : msg_bytes(msg);
        if (data == NULL || PyList_Append(parts, data) < 0) {
            Py_XDECREF(data);
            drain_rest(sock, msg, total, count);
            z_msg_close(msg);
            return -1;
        }
        Py_DECREF(data);
        if (!z_msg_more(msg)) {
            break;
        }
        z_msg_close(msg);
        z_msg_init(msg);
        int err = recv_part(sock, msg);
        if (err != 0) { /* cannot happen: libzmq delivers multipart messages whole */
            z_msg_close(msg);
            recv_failed(err);
            return -1;
        }
        *total += (long long)z_msg_size(msg);
        *count += 1;
        if (*total > limit) {
            *too_large = 1;
            drain_rest(sock, msg, total, count);
            break;
        }
    }
    z_msg_close(msg);
    return 0;
}

PyDoc_STRVAR(recv_frames_doc,
"recv_frames(socket_address)\n--\n\n"
"One whole multipart message as a list of bytes; zmq.Again if none is queued.");

static PyObject *recv_frames(PyObject *Py_UNUSED(self), PyObject *arg) {
    void *sock;
    if (not_bound() || socket_arg(arg, &sock) < 0) {
        return NULL;
    }
    zmq_msg_t msg;
    if (recv_first(sock, &msg) < 0) {
        return NULL;
    }
    long long total = 0;
    Py_ssize_t count = 1;
    int too_large = 0;
    PyObject *parts = PyList_New(0);
    if (take_message(sock, &msg, parts, LLONG_MAX, &total, &count, &too_large) < 0) {
        Py_XDECREF(parts);
        return NULL;
    }
    return parts;
}

/* The first frame's metadata for recv_bounded: the property's value and the source fd. */
static PyObject *first_frame_meta(zmq_msg_t *msg, const char *prop, int *fd) {
    int got = z_msg_get(msg, ZMQ_SRCFD);
    *fd = got < 0 ? -1 : got;
    if (prop == NULL) {
        Py_RETURN_NONE;
    }
    const char *value = z_msg_gets(msg, prop);
    if (value == NULL) { /* no ZAP on this connection / not a TCP connection */
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8(value, (Py_ssize_t)strlen(value), "replace");
}

PyDoc_STRVAR(recv_bounded_doc,
"recv_bounded(socket_address, limit, prop)\n--\n\n"
"The next ROUTER message, capped at `limit` bytes after its routing id: returns (parts,\n"
"user, fd, total, count, too_large). `user` is the first frame's `prop` metadata (\"User-Id\",\n"
"\"Peer-Address\") or None; `fd` its SRCFD. When the cap is passed, the rest of the message is\n"
"received and dropped, `parts` holds the frames kept before it and too_large is True.\n"
"zmq.Again if no message is queued. raftlog.transport.recv_bounded wraps it.");

static PyObject *recv_bounded(PyObject *Py_UNUSED(self), PyObject *const *args,
                              Py_ssize_t nargs) {
    void *sock;
    if (socket_of(args, nargs, 3, "recv_bounded(socket_address, limit, prop)", &sock) < 0) {
        return NULL;
    }
    long long limit = PyLong_AsLongLong(args[1]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    const char *prop = NULL;
    if (args[2] != Py_None && (prop = PyUnicode_AsUTF8(args[2])) == NULL) {
        return NULL;
    }
    zmq_msg_t msg;
    if (recv_first(sock, &msg) < 0) {
        return NULL;
    }
    int fd;
    long long total = 0; /* the routing id is the peer's own, not the sender's bytes */
    Py_ssize_t count = 1;
    int too_large = 0;
    PyObject *user = first_frame_meta(&msg, prop, &fd);
    PyObject *parts = user == NULL ? NULL : PyList_New(0);
    if (take_message(sock, &msg, parts, limit, &total, &count, &too_large) < 0) {
        Py_XDECREF(parts);
        Py_XDECREF(user);
        return NULL;
    }
    return Py_BuildValue("(NNinnO)", parts, user, fd, (Py_ssize_t)total, count,
                         too_large ? Py_True : Py_False);
}

/* Whether `parts` is a message of the run's shape: [routing, id, type, ident, data] with an id
 * of `id_size` bytes, the type and ident given, and 1..max_data bytes of data. */
static int of_shape(PyObject *parts, PyObject *type, PyObject *ident, Py_ssize_t id_size,
                    Py_ssize_t max_data) {
    if (PyList_GET_SIZE(parts) != 5) {
        return 0;
    }
    PyObject *id = PyList_GET_ITEM(parts, 1), *data = PyList_GET_ITEM(parts, 4);
    PyObject *got_type = PyList_GET_ITEM(parts, 2), *got_ident = PyList_GET_ITEM(parts, 3);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    return PyBytes_GET_SIZE(id) == id_size && size > 0 && size <= max_data &&
           PyBytes_GET_SIZE(got_type) == PyBytes_GET_SIZE(type) &&
           memcmp(PyBytes_AS_STRING(got_type), PyBytes_AS_STRING(type),
                  (size_t)PyBytes_GET_SIZE(type)) == 0 &&
           PyBytes_GET_SIZE(got_ident) == PyBytes_GET_SIZE(ident) &&
           memcmp(PyBytes_AS_STRING(got_ident), PyBytes_AS_STRING(ident),
                  (size_t)PyBytes_GET_SIZE(ident)) == 0;
}

/* tally[fd] += add; 0, or -1 with the error set. */
static int tally_add(PyObject *tally, int fd, long long add) {
    PyObject *key = PyLong_FromLong(fd);
    if (key == NULL) {
        return -1;
    }
    PyObject *had = PyDict_GetItemWithError(tally, key); /* borrowed */
    long long sum = add;
    if (had != NULL) {
        sum += PyLong_AsLongLong(had);
    }
    PyObject *value = PyErr_Occurred() ? NULL : PyLong_FromLongLong(sum);
    int rc = value == NULL ? -1 : PyDict_SetItem(tally, key, value);
    Py_XDECREF(value);
    Py_DECREF(key);
    return rc;
}

PyDoc_STRVAR(take_run_doc,
"take_run(socket_address, limit, shape, queue, tally, allowance, max_count)\n--\n\n"
"Take up to `max_count` ROUTER messages (each capped like recv_bounded at `limit`). Each of\n"
"`shape` = (type, ident, id_size, max_data) -- [routing, id, type, ident, data], see\n"
"of_shape -- goes into `queue` as (routing, id, data); the first message of any other shape\n"
"(or too large) ends the run and is returned. Every message adds its bytes plus `allowance`\n"
"per frame to tally[fd]. Returns (taken, other): other is None when the socket had no more\n"
"or `max_count` were taken, else (parts, total, too_large, fd), parts cut to the routing id\n"
"and message id when too large, fd its connection's SRCFD (-1: none).\n"
"raftlog.transport.take_run_py is the definition.");

static PyObject *take_run(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    void *sock;
    if (socket_of(args, nargs, 7,
                  "take_run(socket_address, limit, shape, queue, tally, allowance, max_count)",
                  &sock) < 0) {
        return NULL;
    }
    PyObject *type, *ident, *queue = args[3], *tally = args[4];
    Py_ssize_t id_size, max_data;
    long long limit = PyLong_AsLongLong(args[1]);
    long long allowance = PyLong_AsLongLong(args[5]);
    Py_ssize_t max_count = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred() ||
        !PyArg_ParseTuple(args[2], "SSnn", &type, &ident, &id_size, &max_data)) {
        return NULL;
    }
    if (!PyList_Check(queue) || !PyDict_Check(tally)) {
        PyErr_SetString(PyExc_TypeError, "take_run: queue must be a list and tally a dict");
        return NULL;
    }
    Py_ssize_t taken = 0;
    while (taken < max_count) {
        zmq_msg_t msg;
        z_msg_init(&msg);
        int err = recv_part(sock, &msg);
        if (err != 0) {
            z_msg_close(&msg);
            if (err == EAGAIN) {
                break;
            }
            return recv_failed(err);
        }
        int got = z_msg_get(&msg, ZMQ_SRCFD), too_large = 0;
        long long total = 0; /* the routing id is the peer's own, not the sender's bytes */
        Py_ssize_t count = 1;
        PyObject *parts = PyList_New(0);
        if (take_message(sock, &msg, parts, limit, &total, &count, &too_large) < 0) {
            Py_XDECREF(parts);
            return NULL;
        }
        taken += 1;
        if (tally_add(tally, got < 0 ? -1 : got, total + allowance * count) < 0) {
            Py_DECREF(parts);
            return NULL;
        }
        if (too_large) { /* the general path needs its routing id and message id only */
            PyObject *head = PyList_GetSlice(parts, 0, 2);
            Py_DECREF(parts);
            return head == NULL ? NULL : Py_BuildValue("(n(NLOi))", taken, head, total, Py_True,
                                                       got < 0 ? -1 : got);
        }
        if (!of_shape(parts, type, ident, id_size, max_data)) {
            return Py_BuildValue("(n(NLOi))", taken, parts, total, Py_False, got < 0 ? -1 : got);
        }
        PyObject *item = PyTuple_Pack(3, PyList_GET_ITEM(parts, 0), PyList_GET_ITEM(parts, 1),
                                      PyList_GET_ITEM(parts, 4));
        Py_DECREF(parts);
        if (item == NULL || PyList_Append(queue, item) < 0) {
            Py_XDECREF(item);
            return NULL;
        }
        Py_DECREF(item);
    }
    return Py_BuildValue("(nO)", taken, Py_None);
}

/* Send one frame (flags given), retrying after a signal; 0, or -1 with the error set. */
/* Send `len` bytes at `buf` as one frame, retrying after a signal: 0, or -1 with the error
 * set (zmq.Again when the high-water mark is reached). */
static int send_buf(void *sock, const void *buf, size_t len, int flags) {
    for (;;) {
        if (z_send(sock, buf, len, flags) >= 0) {
            return 0;
        }
        int err = z_errno();
        if (err != EINTR) {
            raise_zmq(err);
            return -1;
        }
        if (PyErr_CheckSignals() < 0) {
            return -1;
        }
    }
}

static int send_part(void *sock, PyObject *frame, int flags) {
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    int rc = send_buf(sock, view.buf, (size_t)view.len, flags);
    PyBuffer_Release(&view);
    return rc;
}

/* Send `frames` (a list or tuple) as the rest of a message; `more` if frames follow them. */
static int send_seq(void *sock, PyObject *frames, int more) {
    PyObject *seq = PySequence_Fast(frames, "frames must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        int last = i == n - 1 && !more;
        /* held: a frame's buffer export may run code that changes the list */
        PyObject *frame = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        int rc = send_part(sock, frame, last ? ZMQ_NOBLOCK : ZMQ_NOBLOCK | ZMQ_SNDMORE);
        Py_DECREF(frame);
        if (rc < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (n != PySequence_Fast_GET_SIZE(seq)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_RuntimeError, "frames changed size while sent");
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

PyDoc_STRVAR(send_frames_doc,
"send_frames(socket_address, frames)\n--\n\n"
"Send `frames` as one multipart message without blocking; zmq.Again (before anything is\n"
"queued) when the socket's high-water mark is reached.");

static PyObject *send_frames(PyObject *Py_UNUSED(self), PyObject *const *args,
                             Py_ssize_t nargs) {
    void *sock;
    if (socket_of(args, nargs, 2, "send_frames(socket_address, frames)", &sock) < 0) {
        return NULL;
    }
    if (PySequence_Size(args[1]) < 1) {
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_IndexError, "no frames to send");
    }
    if (send_seq(sock, args[1], 0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* `routing`, `msg_id`, then the frames of `body` (a sequence, maybe empty) as one message:
 * 0, or -1 with the error set. */
static int send_routed_parts(void *sock, PyObject *routing, PyObject *msg_id, PyObject *body) {
    Py_ssize_t count = PySequence_Size(body);
    if (count < 0) {
        return -1;
    }
    int id_flags = count > 0 ? ZMQ_NOBLOCK | ZMQ_SNDMORE : ZMQ_NOBLOCK;
    if (send_part(sock, routing, ZMQ_NOBLOCK | ZMQ_SNDMORE) < 0 ||
        send_part(sock, msg_id, id_flags) < 0 || (count > 0 && send_seq(sock, body, 0) < 0)) {
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(send_routed_doc,
"send_routed(socket_address, routing, msg_id, body)\n--\n\n"
"A reply on a ROUTER: `routing`, `msg_id`, then the frames of `body`; zmq.Again like\n"
"send_frames.");

static PyObject *send_routed(PyObject *Py_UNUSED(self), PyObject *const *args,
                             Py_ssize_t nargs) {
    void *sock;
    if (socket_of(args, nargs, 4, "send_routed(socket_address, routing, msg_id, body)",
                  &sock) < 0) {
        return NULL;
    }
    if (send_routed_parts(sock, args[1], args[2], args[3]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* `value` (0 <= value <= INT32_MAX) packed as msgpack-python packs an int: its shortest
 * form. Returns the length written to `out` (at most 5 bytes). */
static size_t pack_small_uint(uint32_t value, unsigned char *out) {
    if (value < 0x80) {
        out[0] = (unsigned char)value;
        return 1;
    }
    if (value <= 0xff) {
        out[0] = 0xcc;
        out[1] = (unsigned char)value;
        return 2;
    }
    if (value <= 0xffff) {
        out[0] = 0xcd;
        out[1] = (unsigned char)(value >> 8);
        out[2] = (unsigned char)value;
        return 3;
    }
    out[0] = 0xce;
    for (int i = 0; i < 4; i++) {
        out[1 + i] = (unsigned char)(value >> (24 - 8 * i));
    }
    return 5;
}

/* One final answer: `routing`, `rid`, then the body of [true, index]. Up to INT32_MAX the
 * body is written here (the bytes of rpc.responses.encode_update_done, pinned by the twins'
 * tests); beyond, `encode(index)` gives it. 0, or -1 with the error set. */
static int send_one_done(void *sock, PyObject *waiter, long long index, PyObject *encode) {
    if (!PyTuple_Check(waiter) || PyTuple_GET_SIZE(waiter) < 2) {
        PyErr_SetString(PyExc_TypeError, "a waiter is a (routing, request id, ...) tuple");
        return -1;
    }
    PyObject *routing = PyTuple_GET_ITEM(waiter, 0), *rid = PyTuple_GET_ITEM(waiter, 1);
    if (index <= INT32_MAX) {
        static const unsigned char true_frame[1] = {1};
        unsigned char body[5];
        size_t len = pack_small_uint((uint32_t)index, body);
        if (send_part(sock, routing, ZMQ_NOBLOCK | ZMQ_SNDMORE) < 0 ||
            send_part(sock, rid, ZMQ_NOBLOCK | ZMQ_SNDMORE) < 0 ||
            send_buf(sock, true_frame, 1, ZMQ_NOBLOCK | ZMQ_SNDMORE) < 0) {
            return -1;
        }
        return send_buf(sock, body, len, ZMQ_NOBLOCK);
    }
    PyObject *frames = PyObject_CallFunction(encode, "L", index);
    if (frames == NULL) {
        return -1;
    }
    int rc = send_routed_parts(sock, routing, rid, frames);
    Py_DECREF(frames);
    return rc;
}

PyDoc_STRVAR(send_update_dones_doc,
"send_update_dones(socket_address, first, waiters, encode)\n--\n\n"
"The final answer [true, first + k] to the k-th waiter's RequestUpdate, each behind its\n"
"routing id and request id; returns how many the ROUTER dropped (zmq.Again).");

static PyObject *send_update_dones(PyObject *Py_UNUSED(self), PyObject *const *args,
                                   Py_ssize_t nargs) {
    void *sock;
    if (socket_of(args, nargs, 4, "send_update_dones(socket_address, first, waiters, encode)",
                  &sock) < 0) {
        return NULL;
    }
    long long first = PyLong_AsLongLong(args[1]);
    if (first == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (first < 0) {
        return PyErr_Format(PyExc_ValueError, "first index %lld is negative", first);
    }
    PyObject *seq = PySequence_Fast(args[2], "waiters must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *again = (PyObject *)Py_TYPE(again_instance);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq), dropped = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* held: `encode` may run code that changes the list */
        PyObject *waiter = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        int rc = send_one_done(sock, waiter, first + i, args[3]);
        Py_DECREF(waiter);
        if (rc < 0) {
            if (!PyErr_ExceptionMatches(again)) {
                Py_DECREF(seq);
                return NULL;
            }
            PyErr_Clear();
            dropped++;
        }
        if (count != PySequence_Fast_GET_SIZE(seq)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_RuntimeError, "waiters changed size while answered");
            return NULL;
        }
    }
    Py_DECREF(seq);
    return PyLong_FromSsize_t(dropped);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, bind_doc},
    {"recv_frames", recv_frames, METH_O, recv_frames_doc},
    {"recv_bounded", (PyCFunction)(void (*)(void))recv_bounded, METH_FASTCALL, recv_bounded_doc},
    {"send_frames", (PyCFunction)(void (*)(void))send_frames, METH_FASTCALL, send_frames_doc},
    {"send_routed", (PyCFunction)(void (*)(void))send_routed, METH_FASTCALL, send_routed_doc},
    {"take_run", (PyCFunction)(void (*)(void))take_run, METH_FASTCALL, take_run_doc},
    {"send_update_dones", (PyCFunction)(void (*)(void))send_update_dones, METH_FASTCALL,
     send_update_dones_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "raftlog._speedups_transport",
    "Compiled twins of raftlog.transport's multipart send and receive (raftlog.speedups "
    "chooses).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups_transport(void) {
    return PyModule_Create(&module);
}
