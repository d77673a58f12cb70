/* Optional compiled versions of rmqtx's per-message byte work.
 *
 * Each function has a pure-Python twin (rmqtx/accel.py says which) with the same signature and
 * results; the Python code stays the reference and the tests compare the two. Built by
 * `pip install .` (or `python setup.py build_ext --inplace`) when a C compiler is present.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *frame_error = NULL; /* rmqtx.remoting.serializer.FrameError, set by configure() */
static PyObject *crc32_fn = NULL;    /* zlib.crc32 */

static PyObject *raise_frame(const char *msg) {
    PyErr_SetString(frame_error ? frame_error : PyExc_ValueError, msg);
    return NULL;
}

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline int16_t be16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]); }

static inline void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v);
}

/* decode_binary_fields(data) -> (code, language, version, opaque, flag, remark, ext) */
static PyObject *decode_binary_fields(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len, pos = 17;
    PyObject *remark = NULL, *ext = NULL, *result = NULL;
    if (size < 21) { raise_frame("bad ROCKETMQ header: shorter than its fixed part"); goto done; }
    int code = be16(d), lang = d[2], version = be16(d + 3);
    int32_t opaque = be32(d + 5), flag = be32(d + 9), remark_len = be32(d + 13);
    if (remark_len < 0 || pos + remark_len > size) { raise_frame("remark length out of range"); goto done; }
    if (remark_len) {
        remark = PyUnicode_DecodeUTF8((const char *)d + pos, remark_len, NULL);
        if (!remark) goto bad_text;
    } else {
        remark = Py_NewRef(Py_None);
    }
    pos += remark_len;
    if (pos + 4 > size) { raise_frame("bad ROCKETMQ header: no extFields length"); goto done; }
    int32_t ext_len = be32(d + pos);
    pos += 4;
    Py_ssize_t end = pos + ext_len;
    if (ext_len < 0 || end > size) { raise_frame("extFields length out of range"); goto done; }
    if (!ext_len) {
        ext = Py_NewRef(Py_None);
    } else {
        ext = PyDict_New();
        if (!ext) goto done;
        while (pos < end) {
            if (pos + 2 > size) { raise_frame("bad ROCKETMQ header: truncated extFields entry"); goto done; }
            int klen = be16(d + pos);
            pos += 2;
            if (klen < 0 || pos + klen + 4 > size) { raise_frame("extFields entry out of range"); goto done; }
            const char *kp = (const char *)d + pos;
            pos += klen;
            int32_t vlen = be32(d + pos);
            pos += 4;
            if (vlen < 0 || pos + vlen > end) { raise_frame("extFields entry out of range"); goto done; }
            PyObject *key = PyUnicode_DecodeUTF8(kp, klen, NULL);
            if (!key) goto bad_text;
            PyObject *value = PyUnicode_DecodeUTF8((const char *)d + pos, vlen, NULL);
            if (!value) { Py_DECREF(key); goto bad_text; }
            int rc = PyDict_SetItem(ext, key, value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (rc < 0) goto done;
            pos += vlen;
        }
    }
    result = Py_BuildValue("(iiiiiOO)", code, lang, version, (int)opaque, (int)flag, remark, ext);
    goto done;
bad_text:
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        raise_frame("bad ROCKETMQ header: text is not UTF-8");
    }
done:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyBuffer_Release(&view);
    return result;
}

/* encode_binary_ext(ext, order) -> bytes: short key length, key, int value length, value */
static PyObject *encode_binary_ext(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_binary_ext(ext: dict, order: tuple)");
        return NULL;
    }
    PyObject *ext = args[0];
    PyObject *order = PySequence_Fast(args[1], "order must be a sequence");
    if (!order) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(order), total = 0;
    PyObject **keys = PySequence_Fast_ITEMS(order);
    const char **kp = PyMem_Malloc(sizeof(char *) * 2 * (n + 1));
    Py_ssize_t *lens = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (n + 1));
    PyObject *out = NULL;
    if (!kp || !lens) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyDict_GetItemWithError(ext, keys[i]);
        if (!value) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, keys[i]); goto done; }
        if (!PyUnicode_Check(keys[i]) || !PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "ext keys and values must be str");
            goto done;
        }
        kp[2 * i] = PyUnicode_AsUTF8AndSize(keys[i], &lens[2 * i]);
        if (!kp[2 * i]) goto done;
        kp[2 * i + 1] = PyUnicode_AsUTF8AndSize(value, &lens[2 * i + 1]);
        if (!kp[2 * i + 1]) goto done;
        if (lens[2 * i] > 32767) { PyErr_SetString(PyExc_ValueError, "ext key longer than 32767 bytes"); goto done; }
        total += 6 + lens[2 * i] + lens[2 * i + 1];
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (!out) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t kl = lens[2 * i], vl = lens[2 * i + 1];
        p[0] = (unsigned char)(kl >> 8); p[1] = (unsigned char)kl;
        memcpy(p + 2, kp[2 * i], kl);
        p += 2 + kl;
        put32(p, (uint32_t)vl);
        memcpy(p + 4, kp[2 * i + 1], vl);
        p += 4 + vl;
    }
done:
    PyMem_Free(kp);
    PyMem_Free(lens);
    Py_DECREF(order);
    return out;
}

/* Java String.hashCode over the UTF-16 units of s, continuing from h. -1 on a lone surrogate. */
static int hash_units(PyObject *s, uint32_t *h) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    uint32_t acc = *h;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *c = data;
        for (Py_ssize_t i = 0; i < n; i++) acc = acc * 31u + c[i];
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 cp = PyUnicode_READ(kind, data, i);
            if (cp >= 0xD800 && cp <= 0xDFFF) return -1;
            if (cp > 0xFFFF) {
                cp -= 0x10000;
                acc = acc * 31u + (0xD800 + (cp >> 10));
                acc = acc * 31u + (0xDC00 + (cp & 0x3FF));
            } else {
                acc = acc * 31u + cp;
            }
        }
    }
    *h = acc;
    return 0;
}

static PyObject *surrogate_error(void) {
    PyErr_SetString(PyExc_UnicodeError, "lone surrogate in a Java string hash");
    return NULL;
}

/* java_string_hash(text) -> signed 32-bit String.hashCode */
static PyObject *java_string_hash(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) { PyErr_SetString(PyExc_TypeError, "str expected"); return NULL; }
    uint32_t h = 0;
    if (hash_units(arg, &h) < 0) return surrogate_error();
    return PyLong_FromLong((long)(int32_t)h);
}

/* index_key_hash2(prefix, key) -> abs(hashCode(prefix + key)), Integer.MIN_VALUE as 0 */
static PyObject *index_key_hash2(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "index_key_hash2(prefix: str, key: str)");
        return NULL;
    }
    uint32_t h = 0;
    if (hash_units(args[0], &h) < 0 || hash_units(args[1], &h) < 0) return surrogate_error();
    int64_t v = (int32_t)h;
    if (v < 0) v = -v;
    if (v > 0x7FFFFFFF) v = 0;
    return PyLong_FromLongLong(v);
}

/* write_record(buf, pos, total, sys_flag, queue_id, flag, queue_offset, physical_offset, born_ts,
 *              born_ip, born_port, store_ts, store_ip, store_port, reconsume_times,
 *              prepared_transaction_offset, body, topic, props) -> None */
static PyObject *write_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 19) { PyErr_SetString(PyExc_TypeError, "write_record takes 19 arguments"); return NULL; }
    long long ints[19];
    static const int int_args[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 14, 15};
    for (size_t i = 0; i < sizeof(int_args) / sizeof(int_args[0]); i++) {
        ints[int_args[i]] = PyLong_AsLongLong(args[int_args[i]]);
        if (ints[int_args[i]] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_buffer buf, born_ip, store_ip, body, topic, props;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_WRITABLE) < 0) return NULL;
    PyObject *result = NULL;
    int got = 0;
    if (PyObject_GetBuffer(args[9], &born_ip, PyBUF_SIMPLE) < 0) goto release;
    got++;
    if (PyObject_GetBuffer(args[12], &store_ip, PyBUF_SIMPLE) < 0) goto release;
    got++;
    if (PyObject_GetBuffer(args[16], &body, PyBUF_SIMPLE) < 0) goto release;
    got++;
    if (PyObject_GetBuffer(args[17], &topic, PyBUF_SIMPLE) < 0) goto release;
    got++;
    if (PyObject_GetBuffer(args[18], &props, PyBUF_SIMPLE) < 0) goto release;
    got++;
    {
        long long pos = ints[1], total = ints[2];
        int sys_flag = (int)ints[3];
        Py_ssize_t born_len = (sys_flag & 0x10) ? 16 : 4, store_len = (sys_flag & 0x20) ? 16 : 4;
        if (born_ip.len != born_len || store_ip.len != store_len) {
            PyErr_SetString(PyExc_ValueError, "host address length does not match the sys flag");
            goto release;
        }
        if (topic.len > 255 || props.len > 32767) {
            PyErr_SetString(PyExc_ValueError, "topic or properties too long");
            goto release;
        }
        Py_ssize_t head = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_len + 4 + 8 + store_len + 4 + 4 + 8 + 4;
        Py_ssize_t need = head + body.len + 1 + topic.len + 2 + props.len;
        if (pos < 0 || pos + need > buf.len) {
            PyErr_SetString(PyExc_ValueError, "record does not fit the buffer");
            goto release;
        }
        PyObject *crc_obj = PyObject_CallOneArg(crc32_fn, args[16]);
        if (!crc_obj) goto release;
        unsigned long crc = PyLong_AsUnsignedLong(crc_obj);
        Py_DECREF(crc_obj);
        if (crc == (unsigned long)-1 && PyErr_Occurred()) goto release;
        unsigned char *p = (unsigned char *)buf.buf + pos;
        put32(p, (uint32_t)total); p += 4;
        put32(p, 0xDAA320A7u); p += 4;
        put32(p, (uint32_t)(crc & 0x7FFFFFFF)); p += 4;
        put32(p, (uint32_t)ints[4]); p += 4;
        put32(p, (uint32_t)ints[5]); p += 4;
        put64(p, (uint64_t)ints[6]); p += 8;
        put64(p, (uint64_t)ints[7]); p += 8;
        put32(p, (uint32_t)sys_flag); p += 4;
        put64(p, (uint64_t)ints[8]); p += 8;
        memcpy(p, born_ip.buf, born_len); p += born_len;
        put32(p, (uint32_t)ints[10]); p += 4;
        put64(p, (uint64_t)ints[11]); p += 8;
        memcpy(p, store_ip.buf, store_len); p += store_len;
        put32(p, (uint32_t)ints[13]); p += 4;
        put32(p, (uint32_t)ints[14]); p += 4;
        put64(p, (uint64_t)ints[15]); p += 8;
        put32(p, (uint32_t)body.len); p += 4;
        memcpy(p, body.buf, body.len); p += body.len;
        *p++ = (unsigned char)topic.len;
        memcpy(p, topic.buf, topic.len); p += topic.len;
        p[0] = (unsigned char)(props.len >> 8); p[1] = (unsigned char)props.len; p += 2;
        memcpy(p, props.buf, props.len);
        result = Py_NewRef(Py_None);
    }
release:
    if (got > 4) PyBuffer_Release(&props);
    if (got > 3) PyBuffer_Release(&topic);
    if (got > 2) PyBuffer_Release(&body);
    if (got > 1) PyBuffer_Release(&store_ip);
    if (got > 0) PyBuffer_Release(&born_ip);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *configure(PyObject *self, PyObject *arg) {
    Py_XSETREF(frame_error, Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_binary_fields", decode_binary_fields, METH_O, "ROCKETMQ header fields: (code, language, version, opaque, flag, remark, ext)."},
    {"encode_binary_ext", (PyCFunction)(void (*)(void))encode_binary_ext, METH_FASTCALL, "extFields block in the given key order."},
    {"java_string_hash", java_string_hash, METH_O, "Java String.hashCode."},
    {"index_key_hash2", (PyCFunction)(void (*)(void))index_key_hash2, METH_FASTCALL, "Index key hash of prefix + key."},
    {"write_record", (PyCFunction)(void (*)(void))write_record, METH_FASTCALL, "Write one commit log record into a buffer."},
    {"configure", configure, METH_O, "Set the exception class raised for malformed frames."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmqtx._accel", "Compiled twins of rmqtx's hot byte work.", -1, methods};

PyMODINIT_FUNC PyInit__accel(void) {
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (!zlib) return NULL;
    crc32_fn = PyObject_GetAttrString(zlib, "crc32");
    Py_DECREF(zlib);
    if (!crc32_fn) return NULL;
    return PyModule_Create(&module);
}
