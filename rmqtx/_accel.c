/* Optional compiled versions of rmqtx's per-message byte work, and the GIL-free group commit thread.
 *
 * Each function has a pure-Python twin (rmqtx/accel.py says which) with the same signature and
 * results; the Python code stays the reference and the tests compare the two. Built by
 * `pip install .` (or `python setup.py build_ext --inplace`) when a C compiler is present.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static PyObject *frame_error = NULL; /* rmqtx.remoting.serializer.FrameError, set by configure() */
static PyObject *crc32_fn = NULL;    /* zlib.crc32 */
static PyObject *struct_error = NULL; /* struct.error: what the pure twins' pack raises out of range */

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

/* The fields of a ROCKETMQ header in d[0:size]: ints into v (code, language, version, opaque, flag),
 * new references into *remark and *ext (None when absent). -1 with an exception set on bad input. */
static int parse_binary_header(const unsigned char *d, Py_ssize_t size, long v[5], PyObject **remark_out, PyObject **ext_out) {
    Py_ssize_t pos = 17;
    PyObject *remark = NULL, *ext = NULL;
    if (size < 21) { raise_frame("bad ROCKETMQ header: shorter than its fixed part"); goto fail; }
    v[0] = be16(d); v[1] = d[2]; v[2] = be16(d + 3); v[3] = be32(d + 5); v[4] = be32(d + 9);
    int32_t remark_len = be32(d + 13);
    if (remark_len < 0 || pos + remark_len > size) { raise_frame("remark length out of range"); goto fail; }
    if (remark_len) {
        remark = PyUnicode_DecodeUTF8((const char *)d + pos, remark_len, NULL);
        if (!remark) goto bad_text;
    } else {
        remark = Py_NewRef(Py_None);
    }
    pos += remark_len;
    if (pos + 4 > size) { raise_frame("bad ROCKETMQ header: no extFields length"); goto fail; }
    int32_t ext_len = be32(d + pos);
    pos += 4;
    Py_ssize_t end = pos + ext_len;
    if (ext_len < 0 || end > size) { raise_frame("extFields length out of range"); goto fail; }
    if (!ext_len) {
        ext = Py_NewRef(Py_None);
    } else {
        ext = PyDict_New();
        if (!ext) goto fail;
        while (pos < end) {
            if (pos + 2 > size) { raise_frame("bad ROCKETMQ header: truncated extFields entry"); goto fail; }
            int klen = be16(d + pos);
            pos += 2;
            if (klen < 0 || pos + klen + 4 > size) { raise_frame("extFields entry out of range"); goto fail; }
            const char *kp = (const char *)d + pos;
            pos += klen;
            int32_t vlen = be32(d + pos);
            pos += 4;
            if (vlen < 0 || pos + vlen > end) { raise_frame("extFields entry out of range"); goto fail; }
            PyObject *key = PyUnicode_DecodeUTF8(kp, klen, NULL);
            if (!key) goto bad_text;
            PyObject *value = PyUnicode_DecodeUTF8((const char *)d + pos, vlen, NULL);
            if (!value) { Py_DECREF(key); goto bad_text; }
            int rc = PyDict_SetItem(ext, key, value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (rc < 0) goto fail;
            pos += vlen;
        }
    }
    *remark_out = remark;
    *ext_out = ext;
    return 0;
bad_text:
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        raise_frame("bad ROCKETMQ header: text is not UTF-8");
    }
fail:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return -1;
}

/* decode_binary_fields(data) -> (code, language, version, opaque, flag, remark, ext) */
static PyObject *decode_binary_fields(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    long v[5];
    PyObject *remark, *ext, *result = NULL;
    if (parse_binary_header((const unsigned char *)view.buf, view.len, v, &remark, &ext) == 0) {
        result = Py_BuildValue("(iiiiiNN)", (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], remark, ext);
    }
    PyBuffer_Release(&view);
    return result;
}

/* What decode_frame_payload builds, set by configure_command: RemotingCommand, the byte offsets of
 * its slots, language names by code, SerializeType.ROCKETMQ and the pure-Python decoder for the rest. */
enum { S_CODE, S_LANGUAGE, S_VERSION, S_OPAQUE, S_FLAG, S_REMARK, S_EXT, S_BODY, S_STYPE, S_FAST, N_SLOTS };
static const char *slot_names[N_SLOTS] = {"code", "language", "version", "opaque", "flag", "remark", "ext_fields",
                                          "body", "serialize_type", "fast_keys"};
static PyTypeObject *cmd_type = NULL;
static Py_ssize_t slot_off[N_SLOTS];
static PyObject *lang_names = NULL, *lang_other = NULL, *stype_rocketmq = NULL, *decode_py = NULL;

static PyObject *configure_command(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyType_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure_command(cls, languages: dict, other, rocketmq, fallback)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[0];
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *descr = PyDict_GetItemString(tp->tp_dict, slot_names[i]);
        if (!descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type) || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s is not a slot of %s", slot_names[i], tp->tp_name);
            return NULL;
        }
        slot_off[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    Py_XSETREF(cmd_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(lang_names, Py_NewRef(args[1]));
    Py_XSETREF(lang_other, Py_NewRef(args[2]));
    Py_XSETREF(stype_rocketmq, Py_NewRef(args[3]));
    Py_XSETREF(decode_py, Py_NewRef(args[4]));
    Py_RETURN_NONE;
}

static inline void set_slot(PyObject *obj, int i, PyObject *value) {
    *(PyObject **)((char *)obj + slot_off[i]) = value;  /* steals value; the slot was NULL */
}

/* decode_frame_payload(payload) -> RemotingCommand: a ROCKETMQ-header frame decoded here, the command's
 * slots filled as its __init__ would; any other frame (JSON, too short) by the pure-Python decoder. */
static PyObject *decode_frame_payload(PyObject *self, PyObject *arg) {
    if (!cmd_type) { PyErr_SetString(PyExc_RuntimeError, "configure_command was not called"); return NULL; }
    if (!PyBytes_Check(arg) || PyBytes_GET_SIZE(arg) < 4) return PyObject_CallOneArg(decode_py, arg);
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t size = PyBytes_GET_SIZE(arg);
    uint32_t mark = (uint32_t)be32(d);
    Py_ssize_t header_len = mark & 0xFFFFFF;
    if ((mark >> 24) != 1 || 4 + header_len > size) return PyObject_CallOneArg(decode_py, arg);
    long v[5];
    PyObject *remark, *ext;
    if (parse_binary_header(d + 4, header_len, v, &remark, &ext) < 0) return NULL;
    PyObject *fast = NULL, *body = NULL, *lang_key = NULL, *obj = NULL;
    PyObject *ints[5] = {NULL, NULL, NULL, NULL, NULL};
    if (ext != Py_None && PyDict_GET_SIZE(ext)) {
        PyObject *keys = PyDict_Keys(ext);
        if (!keys) goto fail;
        fast = PyList_AsTuple(keys);
        Py_DECREF(keys);
    } else {
        fast = PyTuple_New(0);
    }
    if (!fast) goto fail;
    body = PyBytes_FromStringAndSize((const char *)d + 4 + header_len, size - 4 - header_len);
    if (!body) goto fail;
    for (int i = 0; i < 5; i++) {
        if (i == 1) continue;
        ints[i] = PyLong_FromLong(v[i]);
        if (!ints[i]) goto fail;
    }
    lang_key = PyLong_FromLong(v[1]);
    if (!lang_key) goto fail;
    PyObject *lang = PyDict_GetItemWithError(lang_names, lang_key);  /* borrowed */
    if (!lang) {
        if (PyErr_Occurred()) goto fail;
        lang = lang_other;
    }
    Py_CLEAR(lang_key);
    obj = cmd_type->tp_alloc(cmd_type, 0);
    if (!obj) goto fail;
    set_slot(obj, S_CODE, ints[0]);
    set_slot(obj, S_LANGUAGE, Py_NewRef(lang));
    set_slot(obj, S_VERSION, ints[2]);
    set_slot(obj, S_OPAQUE, ints[3]);
    set_slot(obj, S_FLAG, ints[4]);
    set_slot(obj, S_REMARK, remark);
    set_slot(obj, S_EXT, ext);
    set_slot(obj, S_BODY, body);
    set_slot(obj, S_STYPE, Py_NewRef(stype_rocketmq));
    set_slot(obj, S_FAST, fast);
    return obj;
fail:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    Py_XDECREF(fast);
    Py_XDECREF(body);
    Py_XDECREF(lang_key);
    for (int i = 0; i < 5; i++) Py_XDECREF(ints[i]);
    return NULL;
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

/* Java String.hashCode over the UTF-16 units of s[start:end], continuing from h. -1 on a lone surrogate. */
static int hash_range(PyObject *s, Py_ssize_t start, Py_ssize_t end, uint32_t *h) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    uint32_t acc = *h;
    if (kind == PyUnicode_1BYTE_KIND) {  /* Latin-1: every character is one unit, none a surrogate */
        const Py_UCS1 *c = data;
        for (Py_ssize_t i = start; i < end; i++) acc = acc * 31u + c[i];
        *h = acc;
        return 0;
    }
    for (Py_ssize_t i = start; i < end; i++) {
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
    *h = acc;
    return 0;
}

/* hash_range over the whole of s */
static int hash_units(PyObject *s, uint32_t *h) {
    return hash_range(s, 0, PyUnicode_GET_LENGTH(s), h);
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

/* parse_properties(text) -> dict: name\x01value items split on \x02, as Java's String.split reads
 * them (trailing empty parts dropped, so only items of exactly two parts are kept). */
static PyObject *parse_properties(PyObject *self, PyObject *arg) {
    PyObject *out = PyDict_New();
    if (!out || arg == Py_None) return out;
    if (!PyUnicode_Check(arg)) { Py_DECREF(out); PyErr_SetString(PyExc_TypeError, "str expected"); return NULL; }
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg), start = 0;
    while (start <= n) {
        Py_ssize_t end = start;
        while (end < n && PyUnicode_READ(kind, data, end) != 2) end++;
        /* item [start, end): name up to the first \x01, value up to the next, then only \x01s */
        Py_ssize_t s1 = start;
        while (s1 < end && PyUnicode_READ(kind, data, s1) != 1) s1++;
        if (s1 < end) {
            Py_ssize_t s2 = s1 + 1;
            while (s2 < end && PyUnicode_READ(kind, data, s2) != 1) s2++;
            Py_ssize_t rest = s2;
            while (rest < end && PyUnicode_READ(kind, data, rest) == 1) rest++;
            if (s2 > s1 + 1 && rest == end) {
                PyObject *k = PyUnicode_Substring(arg, start, s1);
                PyObject *v = k ? PyUnicode_Substring(arg, s1 + 1, s2) : NULL;
                if (!v || PyDict_SetItem(out, k, v) < 0) {
                    Py_XDECREF(k); Py_XDECREF(v); Py_DECREF(out);
                    return NULL;
                }
                Py_DECREF(k); Py_DECREF(v);
            }
        }
        start = end + 1;
    }
    return out;
}

/* One IndexFile entry at `count`: the 20-byte entry (hash, offset, seconds since begin_ts, the slot's
 * previous entry) and the slot pointed at it. *prev gets the slot's previous entry (0: none); -1 when
 * the entry or its slot lies outside the buffer. */
static int index_entry_write(unsigned char *b, Py_ssize_t len, long long slot_num, long long count, long long begin_ts,
                             long long key_hash, long long phy, long long ts, long long *prev) {
    long long slot = key_hash % slot_num;
    if (slot < 0) slot += slot_num;  /* Python's modulo */
    long long slot_pos = 40 + slot * 4, entry_pos = 40 + slot_num * 4 + count * 20;
    if (slot_pos + 4 > len || entry_pos + 20 > len) return -1;
    long long p = be32(b + slot_pos);
    if (p <= 0 || p > count) p = 0;
    long long diff = 0;
    if (begin_ts > 0) {
        long long d = ts - begin_ts;
        diff = d >= 0 ? d / 1000 : -((-d + 999) / 1000);  /* floor division, as Python's // */
        diff = diff > 0x7FFFFFFF ? 0x7FFFFFFF : diff < 0 ? 0 : diff;
    }
    unsigned char *e = b + entry_pos;
    put32(e, (uint32_t)key_hash); put64(e + 4, (uint64_t)phy); put32(e + 12, (uint32_t)diff); put32(e + 16, (uint32_t)p);
    put32(b + slot_pos, (uint32_t)count);
    *prev = p;
    return 0;
}

/* index_put(buf, slot_num, index_num, count, begin_ts, key_hash, phy, store_ts) -> prev entry of the
 * slot (0: none), or -1 when the file is full; writes the 20-byte entry and points the slot at it. */
static PyObject *index_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) { PyErr_SetString(PyExc_TypeError, "index_put takes 8 arguments"); return NULL; }
    long long v[8];
    for (int i = 1; i < 8; i++) {
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
    }
    long long slot_num = v[1], index_num = v[2], count = v[3], begin_ts = v[4], key_hash = v[5], phy = v[6], ts = v[7];
    if (count >= index_num) return PyLong_FromLong(-1);
    if (slot_num <= 0 || count < 0) { PyErr_SetString(PyExc_ValueError, "bad index arguments"); return NULL; }
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_WRITABLE) < 0) return NULL;
    long long prev;
    int outside = index_entry_write(buf.buf, buf.len, slot_num, count, begin_ts, key_hash, phy, ts, &prev);
    PyBuffer_Release(&buf);
    if (outside) {
        PyErr_SetString(PyExc_ValueError, "index entry outside the file");
        return NULL;
    }
    return PyLong_FromLongLong(prev);
}

/* IndexFile attributes index_put_keys reads and writes, interned at import */
enum { I_MM, I_SLOT_NUM, I_INDEX_NUM, I_BEGIN_TS, I_END_TS, I_BEGIN_PHY, I_END_PHY, I_SLOT_COUNT, I_INDEX_COUNT, N_IATTR };
static const char *iattr_names[N_IATTR] = {"mm", "slot_num", "index_num", "begin_ts", "end_ts", "begin_phy", "end_phy",
                                           "slot_count", "index_count"};
static PyObject *iattr[N_IATTR];

/* index_put_keys(f, prefix, uniq_key, keys, phy, store_ts) -> int: IndexFile.put_key for prefix+uniq_key
 * (when set) and prefix+each word of keys split on " ", in that order, then f's header written into
 * its mapping: how many entries went in; -1 - how many when f filled up first (header left to the caller). */
static PyObject *index_put_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "index_put_keys(f, prefix: str, uniq_key, keys, phy, store_ts)");
        return NULL;
    }
    PyObject *f = args[0], *prefix = args[1], *uniq = args[2], *keys = args[3];
    int has_uniq = PyObject_IsTrue(uniq), has_keys = PyObject_IsTrue(keys);
    if (has_uniq < 0 || has_keys < 0) return NULL;
    if ((has_uniq && !PyUnicode_Check(uniq)) || (has_keys && !PyUnicode_Check(keys))) {
        PyErr_SetString(PyExc_TypeError, "index keys must be str");
        return NULL;
    }
    long long phy = PyLong_AsLongLong(args[4]);
    if (phy == -1 && PyErr_Occurred()) return NULL;
    long long ts = PyLong_AsLongLong(args[5]);
    if (ts == -1 && PyErr_Occurred()) return NULL;
    long long v[N_IATTR];
    for (int i = I_SLOT_NUM; i < N_IATTR; i++) {
        PyObject *o = PyObject_GetAttr(f, iattr[i]);
        if (!o) return NULL;
        v[i] = PyLong_AsLongLong(o);
        Py_DECREF(o);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *mm = PyObject_GetAttr(f, iattr[I_MM]);
    if (!mm) return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(mm, &buf, PyBUF_WRITABLE) < 0) { Py_DECREF(mm); return NULL; }
    Py_DECREF(mm);
    long long slot_num = v[I_SLOT_NUM], index_num = v[I_INDEX_NUM];
    uint32_t prefix_hash = 0;
    long long done = 0, full = 0, changed = 0;
    int failed = 0;
    if (slot_num <= 0) { PyErr_SetString(PyExc_ValueError, "bad index arguments"); failed = 1; goto write_back; }
    if (hash_units(prefix, &prefix_hash) < 0) { surrogate_error(); failed = 1; goto write_back; }
    Py_ssize_t klen = has_keys ? PyUnicode_GET_LENGTH(keys) : 0, pos = 0;
    int first = 1;
    for (;;) {
        uint32_t h = prefix_hash;
        if (first && has_uniq) {
            if (hash_units(uniq, &h) < 0) { surrogate_error(); failed = 1; goto write_back; }
        } else {
            /* the next non-empty word of keys */
            if (!has_keys) break;
            Py_ssize_t start = pos, end;
            int kind = PyUnicode_KIND(keys);
            const void *data = PyUnicode_DATA(keys);
            while (start < klen && PyUnicode_READ(kind, data, start) == ' ') start++;
            if (start >= klen) break;
            end = start;
            while (end < klen && PyUnicode_READ(kind, data, end) != ' ') end++;
            pos = end;
            if (hash_range(keys, start, end, &h) < 0) { surrogate_error(); failed = 1; goto write_back; }
        }
        first = 0;
        int64_t key_hash = (int32_t)h;
        if (key_hash < 0) key_hash = -key_hash;
        if (key_hash > 0x7FFFFFFF) key_hash = 0;
        long long count = v[I_INDEX_COUNT], begin_ts = v[I_BEGIN_TS];
        if (count >= index_num) { full = 1; break; }
        if (count < 0) { PyErr_SetString(PyExc_ValueError, "bad index arguments"); failed = 1; goto write_back; }
        long long prev;
        if (index_entry_write(buf.buf, buf.len, slot_num, count, begin_ts, key_hash, phy, ts, &prev) < 0) {
            PyErr_SetString(PyExc_ValueError, "index entry outside the file");
            failed = 1;
            goto write_back;
        }
        if (count <= 1) { v[I_BEGIN_PHY] = phy; v[I_BEGIN_TS] = ts; }
        if (prev == 0) v[I_SLOT_COUNT]++;
        v[I_INDEX_COUNT] = count + 1;
        v[I_END_PHY] = phy;
        v[I_END_TS] = ts;
        done++;
        changed = 1;
    }
    if (!full) {  /* IndexFile.write_header */
        if (buf.len < 40 || v[I_SLOT_COUNT] < -2147483648LL || v[I_SLOT_COUNT] > 2147483647LL
                || v[I_INDEX_COUNT] < -2147483648LL || v[I_INDEX_COUNT] > 2147483647LL) {
            PyErr_SetString(struct_error, "index header out of range");
            failed = 1;
            goto write_back;
        }
        unsigned char *b = buf.buf;
        put64(b, (uint64_t)v[I_BEGIN_TS]); put64(b + 8, (uint64_t)v[I_END_TS]);
        put64(b + 16, (uint64_t)v[I_BEGIN_PHY]); put64(b + 24, (uint64_t)v[I_END_PHY]);
        put32(b + 32, (uint32_t)v[I_SLOT_COUNT]); put32(b + 36, (uint32_t)v[I_INDEX_COUNT]);
    }
write_back:
    PyBuffer_Release(&buf);
    if (changed) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        for (int i = I_BEGIN_TS; i < N_IATTR; i++) {
            PyObject *o = PyLong_FromLongLong(v[i]);
            if (!o || PyObject_SetAttr(f, iattr[i], o) < 0) { Py_XDECREF(o); Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb); return NULL; }
            Py_DECREF(o);
        }
        PyErr_Restore(et, ev, tb);
    }
    if (failed) return NULL;
    return PyLong_FromLongLong(full ? -1 - done : done);
}

static int parse_bool_text(PyObject *v, int *out) {
    /* v.strip().lower() in ("true", "1"); what Java writes ("true"/"false") is read without a call */
    if (PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(v);
        const char *c = (const char *)PyUnicode_1BYTE_DATA(v);
        if (n == 5 && memcmp(c, "false", 5) == 0) { *out = 0; return 0; }
        if (n == 4 && memcmp(c, "true", 4) == 0) { *out = 1; return 0; }
    }
    PyObject *s = PyObject_CallMethod(v, "strip", NULL);
    if (!s) return -1;
    PyObject *l = PyObject_CallMethod(s, "lower", NULL);
    Py_DECREF(s);
    if (!l) return -1;
    *out = PyUnicode_Check(l) && (PyUnicode_CompareWithASCIIString(l, "true") == 0 || PyUnicode_CompareWithASCIIString(l, "1") == 0);
    Py_DECREF(l);
    return 0;
}

/* int(v) for a str: plain ASCII decimals (optional '-', up to 18 digits) read here, the rest by int() */
static PyObject *int_of_text(PyObject *v) {
    if (PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(v), i = 0;
        const char *c = (const char *)PyUnicode_1BYTE_DATA(v);
        int neg = n > 0 && c[0] == '-';
        i = neg;
        if (n - i >= 1 && n - i <= 18) {
            long long acc = 0;
            for (; i < n && c[i] >= '0' && c[i] <= '9'; i++) acc = acc * 10 + (c[i] - '0');
            if (i == n) return PyLong_FromLongLong(neg ? -acc : acc);
        }
    }
    return PyNumber_Long(v);
}

static PyObject *v2_keys[14]; /* "a".."n" in send_v2_values' order, made once at import */

/* send_v2_values(ext) -> the 14 SendMessageRequestHeader values from SEND_MESSAGE_V2's short names,
 * or None when a required one is missing or a number does not parse (the caller goes the generic way). */
static PyObject *send_v2_values(PyObject *self, PyObject *ext) {
    if (!PyDict_Check(ext)) Py_RETURN_NONE;
    /* value kinds: 0 str as is (required), 1 int (required), 2 optional as is, 3 optional int, 4 bool */
    static const int kinds[] = {0, 0, 0, 1, 1, 1, 1, 1, 2, 3, 4, 4, 3, 2};
    PyObject *out = PyTuple_New(14);
    if (!out) return NULL;
    for (int i = 0; i < 14; i++) {
        PyObject *v = PyDict_GetItemWithError(ext, v2_keys[i]);  /* borrowed */
        if (!v && PyErr_Occurred()) goto error;
        PyObject *val = NULL;
        switch (kinds[i]) {
        case 0:
            if (!v) goto fallback;
            val = Py_NewRef(v);
            break;
        case 1:
            if (!v) goto fallback;
            val = int_of_text(v);
            if (!val) goto number_error;
            break;
        case 2:
            val = Py_NewRef(v ? v : Py_None);
            break;
        case 3:
            if (!v) { val = Py_NewRef(Py_None); break; }
            val = int_of_text(v);
            if (!val) goto number_error;
            break;
        case 4: {
            int b = 0;
            if (v && parse_bool_text(v, &b) < 0) goto error;
            val = Py_NewRef(b ? Py_True : Py_False);
            break;
        }
        }
        PyTuple_SET_ITEM(out, i, val);
    }
    return out;
number_error:
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto error;
    PyErr_Clear();
fallback:
    Py_DECREF(out);
    Py_RETURN_NONE;
error:
    Py_DECREF(out);
    return NULL;
}


/* binary_frame_head(code, lang, version, opaque, flag, remark: bytes, ext: dict | None, order, body_len)
 * -> the frame's length prefix, type-and-length int and ROCKETMQ header, in one bytes */
static PyObject *binary_frame_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) { PyErr_SetString(PyExc_TypeError, "binary_frame_head takes 9 arguments"); return NULL; }
    long long v[5];
    static const long long lo[5] = {-32768, 0, -32768, -2147483648LL, -2147483648LL};
    static const long long hi[5] = {32767, 255, 32767, 2147483647LL, 2147483647LL};
    for (int i = 0; i < 5; i++) {
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
        if (v[i] < lo[i] || v[i] > hi[i]) { PyErr_SetString(struct_error, "header field out of range"); return NULL; }
    }
    long long body_len = PyLong_AsLongLong(args[8]);
    if (body_len == -1 && PyErr_Occurred()) return NULL;
    if (!PyBytes_Check(args[5])) { PyErr_SetString(PyExc_TypeError, "remark must be bytes"); return NULL; }
    PyObject *ext_bytes = NULL;
    if (args[6] != Py_None && PyObject_IsTrue(args[6])) {
        PyObject *ea[2] = {args[6], args[7]};
        ext_bytes = encode_binary_ext(self, ea, 2);
        if (!ext_bytes) return NULL;
    }
    Py_ssize_t rlen = PyBytes_GET_SIZE(args[5]), elen = ext_bytes ? PyBytes_GET_SIZE(ext_bytes) : 0;
    Py_ssize_t hlen = 17 + rlen + 4 + elen;
    long long total = 4 + hlen + body_len;
    if (total > 2147483647LL || hlen > 0xFFFFFF) {
        Py_XDECREF(ext_bytes);
        PyErr_SetString(struct_error, "frame too long");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + hlen);
    if (!out) { Py_XDECREF(ext_bytes); return NULL; }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    put32(p, (uint32_t)total);
    put32(p + 4, (uint32_t)((1u << 24) | (uint32_t)hlen));
    p += 8;
    p[0] = (unsigned char)((uint16_t)v[0] >> 8); p[1] = (unsigned char)v[0];
    p[2] = (unsigned char)v[1];
    p[3] = (unsigned char)((uint16_t)v[2] >> 8); p[4] = (unsigned char)v[2];
    put32(p + 5, (uint32_t)v[3]);
    put32(p + 9, (uint32_t)v[4]);
    put32(p + 13, (uint32_t)rlen);
    p += 17;
    memcpy(p, PyBytes_AS_STRING(args[5]), rlen);
    p += rlen;
    put32(p, (uint32_t)elen);
    if (elen) memcpy(p + 4, PyBytes_AS_STRING(ext_bytes), elen);
    Py_XDECREF(ext_bytes);
    return out;
}

/* The text of an int for a header value: decimal digits written here when it fits, else str(). */
static int int_text(PyObject *v, char *buf, size_t cap, PyObject **holder, const char **out, Py_ssize_t *len) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (!overflow) {
            *len = snprintf(buf, cap, "%lld", x);
            *out = buf;
            return 0;
        }
    }
    *holder = PyObject_Str(v);
    if (!*holder) return -1;
    *out = PyUnicode_AsUTF8AndSize(*holder, len);
    return *out ? 0 : -1;
}

static inline unsigned char *put_entry(unsigned char *p, const char *k, Py_ssize_t kl, const char *v, Py_ssize_t vl) {
    p[0] = (unsigned char)(kl >> 8); p[1] = (unsigned char)kl;
    memcpy(p + 2, k, kl);
    p += 2 + kl;
    put32(p, (uint32_t)vl);
    memcpy(p + 4, v, vl);
    return p + 4 + vl;
}

/* send_answer_frame(code, opaque, region, trace_on, msg_id, queue_id, queue_offset) -> bytes: the whole
 * ROCKETMQ-header answer to a stored message (JAVA, version 409, response flag, no remark, no body),
 * ext fields msgId, queueId, queueOffset, TRACE_ON, MSG_REGION in that order. */
static PyObject *send_answer_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) { PyErr_SetString(PyExc_TypeError, "send_answer_frame takes 7 arguments"); return NULL; }
    long long code = PyLong_AsLongLong(args[0]);
    if (code == -1 && PyErr_Occurred()) return NULL;
    long long opaque = PyLong_AsLongLong(args[1]);
    if (opaque == -1 && PyErr_Occurred()) return NULL;
    if (code < -32768 || code > 32767 || opaque < -2147483648LL || opaque > 2147483647LL) {
        PyErr_SetString(struct_error, "header field out of range");
        return NULL;
    }
    for (int i = 2; i < 5; i++) {
        if (!PyUnicode_Check(args[i])) { PyErr_SetString(PyExc_TypeError, "ext keys and values must be str"); return NULL; }
    }
    Py_ssize_t rl, tl, ml, ql, ol;
    const char *region = PyUnicode_AsUTF8AndSize(args[2], &rl);
    if (!region) return NULL;
    const char *trace = PyUnicode_AsUTF8AndSize(args[3], &tl);
    if (!trace) return NULL;
    const char *msg_id = PyUnicode_AsUTF8AndSize(args[4], &ml);
    if (!msg_id) return NULL;
    char qbuf[32], obuf[32];
    const char *q, *o;
    PyObject *qh = NULL, *oh = NULL, *out = NULL;
    if (int_text(args[5], qbuf, sizeof qbuf, &qh, &q, &ql) < 0) goto done;
    if (int_text(args[6], obuf, sizeof obuf, &oh, &o, &ol) < 0) goto done;
    /* key lengths: msgId 5, queueId 7, queueOffset 11, TRACE_ON 8, MSG_REGION 10 */
    Py_ssize_t elen = 5 * 6 + 5 + 7 + 11 + 8 + 10 + ml + ql + ol + tl + rl;
    Py_ssize_t hlen = 17 + 4 + elen;
    if (hlen > 0xFFFFFF) { PyErr_SetString(struct_error, "frame too long"); goto done; }
    out = PyBytes_FromStringAndSize(NULL, 8 + hlen);
    if (!out) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    put32(p, (uint32_t)(4 + hlen));
    put32(p + 4, (uint32_t)((1u << 24) | (uint32_t)hlen));
    p += 8;
    p[0] = (unsigned char)((uint16_t)code >> 8); p[1] = (unsigned char)code;
    p[2] = 0;  /* LanguageCode.JAVA */
    p[3] = (unsigned char)(409 >> 8); p[4] = (unsigned char)(409 & 0xFF);
    put32(p + 5, (uint32_t)opaque);
    put32(p + 9, 1u);  /* RESPONSE_FLAG */
    put32(p + 13, 0u); /* no remark */
    put32(p + 17, (uint32_t)elen);
    p += 21;
    p = put_entry(p, "msgId", 5, msg_id, ml);
    p = put_entry(p, "queueId", 7, q, ql);
    p = put_entry(p, "queueOffset", 11, o, ol);
    p = put_entry(p, "TRACE_ON", 8, trace, tl);
    put_entry(p, "MSG_REGION", 10, region, rl);
done:
    Py_XDECREF(qh);
    Py_XDECREF(oh);
    return out;
}

/* offset_msg_id(store_ip, store_port, offset) -> str: upper-case hex of the address bytes, the port
 * as a signed 32-bit int and the offset as an unsigned 64-bit one. */
static PyObject *offset_msg_id(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "offset_msg_id takes 3 arguments"); return NULL; }
    if (!PyBytes_Check(args[0])) { PyErr_SetString(PyExc_TypeError, "store_ip must be bytes"); return NULL; }
    long long port = PyLong_AsLongLong(args[1]);
    if (port == -1 && PyErr_Occurred()) return NULL;
    if (port < -2147483648LL || port > 2147483647LL) { PyErr_SetString(struct_error, "port out of range"); return NULL; }
    if (!PyLong_Check(args[2])) { PyErr_SetString(PyExc_TypeError, "offset must be an int"); return NULL; }
    unsigned long long off = PyLong_AsUnsignedLongLongMask(args[2]);
    if (off == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    if (n > 64) { PyErr_SetString(PyExc_ValueError, "store_ip too long"); return NULL; }
    unsigned char raw[64 + 12];
    memcpy(raw, PyBytes_AS_STRING(args[0]), n);
    put32(raw + n, (uint32_t)port);
    put64(raw + n + 4, off);
    static const char hex[] = "0123456789ABCDEF";
    char text[2 * (64 + 12)];
    for (Py_ssize_t i = 0; i < n + 12; i++) {
        text[2 * i] = hex[raw[i] >> 4];
        text[2 * i + 1] = hex[raw[i] & 15];
    }
    return PyUnicode_FromStringAndSize(text, 2 * (n + 12));
}

/* join_properties(props, order) -> str: f"{name}\x01{props[name]}" for each name of order, joined by \x02
 * (anything not a str is formatted as an f-string would). */
static PyObject *join_properties(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "join_properties takes 2 arguments"); return NULL; }
    PyObject *props = args[0];
    PyObject *order = PySequence_Fast(args[1], "order must be a sequence");
    if (!order) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(order);
    PyObject **names = PySequence_Fast_ITEMS(order);
    PyObject **parts = PyMem_Calloc(2 * n + 1, sizeof(PyObject *));
    PyObject *out = NULL;
    if (!parts) { PyErr_NoMemory(); goto done; }
    Py_ssize_t total = n ? 2 * n - 1 : 0;
    Py_UCS4 maxchar = 127;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyObject_GetItem(props, names[i]);
        if (!value) goto done;
        PyObject *items[2] = {names[i], value};
        for (int j = 0; j < 2; j++) {
            PyObject *text = PyUnicode_CheckExact(items[j]) ? Py_NewRef(items[j]) : PyObject_Format(items[j], NULL);
            if (!text) { Py_DECREF(value); goto done; }
            parts[2 * i + j] = text;
            total += PyUnicode_GET_LENGTH(text);
            Py_UCS4 m = PyUnicode_MAX_CHAR_VALUE(text);
            if (m > maxchar) maxchar = m;
        }
        Py_DECREF(value);
    }
    out = PyUnicode_New(total, maxchar);
    if (!out) goto done;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), pos++, 2);
        Py_ssize_t kl = PyUnicode_GET_LENGTH(parts[2 * i]), vl = PyUnicode_GET_LENGTH(parts[2 * i + 1]);
        if (PyUnicode_CopyCharacters(out, pos, parts[2 * i], 0, kl) < 0) { Py_CLEAR(out); goto done; }
        pos += kl;
        PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), pos++, 1);
        if (PyUnicode_CopyCharacters(out, pos, parts[2 * i + 1], 0, vl) < 0) { Py_CLEAR(out); goto done; }
        pos += vl;
    }
done:
    if (parts) {
        for (Py_ssize_t i = 0; i < 2 * n; i++) Py_XDECREF(parts[i]);
        PyMem_Free(parts);
    }
    Py_DECREF(order);
    return out;
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

/* scan_units(units, i, n, mm, mm_from, mm_wrote, max_phy, memory, count, total, mem_n, mem_b,
 *            disk_n, disk_b, tags, ext_max, messages, qofs, base)
 *   -> (i, count, total, last_phy): the plain run of get_message's loop, see consume_queue.scan_units. */
static PyObject *scan_units(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 19) { PyErr_SetString(PyExc_TypeError, "scan_units takes 19 arguments"); return NULL; }
    long long v[19];
    static const int int_args[] = {1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 18};
    for (size_t k = 0; k < sizeof(int_args) / sizeof(int_args[0]); k++) {
        v[int_args[k]] = PyLong_AsLongLong(args[int_args[k]]);
        if (v[int_args[k]] == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *tags = args[14], *messages = args[16], *qofs = args[17];
    if (tags != Py_None && !PyAnySet_Check(tags)) { PyErr_SetString(PyExc_TypeError, "tags must be a set or None"); return NULL; }
    if (!PyList_Check(messages) || !PyList_Check(qofs)) { PyErr_SetString(PyExc_TypeError, "messages and qofs must be lists"); return NULL; }
    long long i = v[1], n = v[2], mm_from = v[4], mm_wrote = v[5], max_phy = v[6], memory = v[7];
    long long count = v[8], total = v[9], mem_n = v[10], mem_b = v[11], disk_n = v[12], disk_b = v[13];
    long long ext_max = v[15], base = v[18], last = -1;
    Py_buffer ub, mb;
    if (PyObject_GetBuffer(args[0], &ub, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[3], &mb, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&ub); return NULL; }
    PyObject *result = NULL;
    if (n > ub.len) n = ub.len;
    if (mm_wrote > mb.len) mm_wrote = mb.len;
    const unsigned char *u = (const unsigned char *)ub.buf, *m = (const unsigned char *)mb.buf;
    while (i >= 0 && i + 20 <= n) {
        long long phy = be64(u + i), size = be32(u + i + 8), tag = be64(u + i + 12);
        if (total && count) {  /* consume_queue.batch_limits: the batch is full */
            if (max_phy - phy > memory) {
                if (count >= disk_n || total + size > disk_b) break;
            } else if (count >= mem_n || total + size > mem_b) break;
        }
        if (tag <= ext_max) break;
        if (tags != Py_None) {
            PyObject *code = PyLong_FromLongLong(tag);
            if (!code) goto done;
            int hit = PySet_Contains(tags, code);
            Py_DECREF(code);
            if (hit < 0) goto done;
            if (!hit) { last = phy; i += 20; continue; }
        }
        long long pos = phy - mm_from;
        if (pos < 0 || size <= 0 || pos + size > mm_wrote) break;
        PyObject *data = PyBytes_FromStringAndSize((const char *)m + pos, (Py_ssize_t)size);
        if (!data) goto done;
        int bad = PyList_Append(messages, data);
        Py_DECREF(data);
        if (bad) goto done;
        PyObject *q = PyLong_FromLongLong(base + i / 20);
        if (!q) goto done;
        bad = PyList_Append(qofs, q);
        Py_DECREF(q);
        if (bad) goto done;
        count++;
        total += size;
        last = phy;
        i += 20;
    }
    result = Py_BuildValue("(LLLL)", i, count, total, last);
done:
    PyBuffer_Release(&mb);
    PyBuffer_Release(&ub);
    return result;
}

/* ---- send_lane: a plain SEND_MESSAGE_V2 stored and answered without building Python objects ----
 *
 * send_lane(lane, payload, conn) -> the answer frame, or None: the frame is not the lane's common
 * case (see docs/send-lane.md) and nothing was written; the ordinary path then takes it. Its twin is
 * that path (SendProcessor.process): tests/broker/test_send_lane.py compares the stores and answers
 * the two leave. Every check comes before the first write; the state stays in the Python objects
 * (lane.refs, rmqtx/broker/processors/send_lane.py), read and written as the Python path does. */

enum { LR_TOPICS, LR_TABLE, LR_CONFIG, LR_STORE, LR_COMMITLOG, LR_INDEX, LR_DIRTY_CQS, LR_STATS, LR_PIPELINE,
       LR_CLUSTER, LR_STORE_IP, LR_FALLBACK, LR_EMPTY, LR_BORN_KEY, LR_BORN_V4_KEY, LR_SYNCED, N_LREFS };
enum { LA_REFS, LA_PERM, LA_BROKER_PERM, LA_RUNNING, LA_SLAVE, LA_DISK_FULL, LA_GATE, LA_CQS, LA_QUEUE, LA_FILES,
       LA_NEXT, LA_WROTE, LA_FILE_SIZE, LA_FROM, LA_MM, LA_QTABLE, LA_LAST_TS, LA_EXT, LA_PENDING, LA_MAPPED,
       LA_USED, LA_MAX_PHY, LA_PREALLOC, LA_PREPARE_NEXT, LA_DIRTY, LA_INDEX_COUNT, LA_INDEX_NUM, LA_SPARE,
       LA_END_PHY, LA_TIMES, LA_COUNTS, LA_LATENCY, LA_WINDOW_END, LA_PUT, LA_ON_PUT, LA_LISTENERS, LA_ARRIVE,
       LA_DISPATCHED_TS, LA_ATTRIBUTES, LA_MAX_MSG, LA_WRITE_QUEUE_NUMS, LA_REGION, LA_TRACE_ON, LA_TRUE, LA_FALSE,
       LA_CLOCK, LA_LISTEN_PORT, N_LATTR };
static const char *lattr_names[N_LATTR] = {
    "refs", "perm", "brokerPermission", "_running", "_slave", "disk_full", "gate", "consume_queues", "queue", "files",
    "_next", "wrote", "file_size", "from_offset", "mm", "topic_queue_table", "last_store_timestamp", "ext", "_pending",
    "mapped", "used", "max_physic_offset", "_prealloc_mark", "prepare_next", "dirty", "index_count", "index_num",
    "_spare", "end_phy", "times", "counts", "latency", "window_end", "put", "on_put", "_listeners", "_arrive",
    "dispatched_ts", "attributes", "max_message_size", "writeQueueNums", "regionId", "traceOn", "true", "false",
    "clock", "listenPort"};
static PyObject *lattr[N_LATTR];

#define LANE_MAX_PROPS 32
#define RECORD_HEAD_V4 88  /* a record's fixed part with IPv4 born and store hosts */

typedef struct { const unsigned char *p; Py_ssize_t n; } span;

/* attribute `name` of obj as a C integer; -1 with an exception set when it is missing or not an int */
static int lane_int(PyObject *obj, int name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, lattr[name]);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* truth of attribute `name` of obj: 1, 0, or -1 with an exception set */
static int lane_true(PyObject *obj, int name) {
    PyObject *v = PyObject_GetAttr(obj, lattr[name]);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* whether attribute `name` of obj is None: 1, 0, or -1 with an exception set */
static int lane_none(PyObject *obj, int name) {
    PyObject *v = PyObject_GetAttr(obj, lattr[name]);
    if (!v) return -1;
    int none = v == Py_None;
    Py_DECREF(v);
    return none;
}

static int lane_set_int(PyObject *obj, int name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (!v) return -1;
    int rc = PyObject_SetAttr(obj, lattr[name], v);
    Py_DECREF(v);
    return rc;
}

/* a header value that send_v2_values reads as int: '-'? then 1..18 ASCII digits, else fallback */
static int lane_parse_int(span s, long long *out) {
    Py_ssize_t i = 0;
    int neg = s.n > 0 && s.p[0] == '-';
    i = neg;
    if (s.n - i < 1 || s.n - i > 18) return -1;
    long long acc = 0;
    for (; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') return -1;
        acc = acc * 10 + (s.p[i] - '0');
    }
    *out = neg ? -acc : acc;
    return 0;
}

static int lane_ascii(span s) {
    for (Py_ssize_t i = 0; i < s.n; i++) if (s.p[i] & 0x80) return 0;
    return 1;
}

/* valid UTF-8, as the frame decoder needs it (1: yes, 0: no, -1: error) */
static int lane_utf8(span s) {
    if (lane_ascii(s)) return 1;
    PyObject *t = PyUnicode_DecodeUTF8((const char *)s.p, s.n, NULL);
    if (t) { Py_DECREF(t); return 1; }
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { PyErr_Clear(); return 0; }
    return -1;
}

static int span_is(span s, const char *text) {
    size_t n = strlen(text);
    return (size_t)s.n == n && memcmp(s.p, text, n) == 0;
}

static uint32_t ascii_hash(const unsigned char *p, Py_ssize_t n) {
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++) h = 31 * h + p[i];
    return h;
}

/* the answer, or Py_None when the frame is not the lane's; NULL with an exception on a broken state */
static PyObject *send_lane(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "send_lane(lane, payload, conn)"); return NULL; }
    PyObject *payload = args[1], *conn = args[2];
    if (!PyBytes_Check(payload)) Py_RETURN_NONE;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(payload);
    Py_ssize_t size = PyBytes_GET_SIZE(payload);
    if (size < 4 + 21) Py_RETURN_NONE;
    uint32_t mark = (uint32_t)be32(d);
    Py_ssize_t hlen = mark & 0xFFFFFF;
    if ((mark >> 24) != 1 || hlen < 21 || 4 + hlen > size) Py_RETURN_NONE;
    const unsigned char *h = d + 4;
    if (be16(h) != 310) Py_RETURN_NONE;                       /* SEND_MESSAGE_V2 */
    int32_t opaque = be32(h + 5), flag = be32(h + 9);
    if (flag & 3) Py_RETURN_NONE;                             /* an answer, or oneway */
    if (be32(h + 13) != 0 || 21 + (Py_ssize_t)be32(h + 17) != hlen) Py_RETURN_NONE;  /* a remark, or bytes after the fields */
    /* the ext fields a..n, each at most once */
    span f[14];
    memset(f, 0, sizeof f);
    Py_ssize_t pos = 21;
    while (pos < hlen) {
        if (pos + 2 > hlen) Py_RETURN_NONE;
        int klen = be16(h + pos);
        pos += 2;
        if (klen < 0 || pos + klen + 4 > hlen) Py_RETURN_NONE;
        span key = {h + pos, klen};
        pos += klen;
        int32_t vlen = be32(h + pos);
        pos += 4;
        if (vlen < 0 || pos + vlen > hlen) Py_RETURN_NONE;
        span value = {h + pos, vlen};
        pos += vlen;
        int ok = lane_utf8(key);
        if (ok <= 0) { if (ok < 0) return NULL; Py_RETURN_NONE; }
        ok = lane_utf8(value);
        if (ok <= 0) { if (ok < 0) return NULL; Py_RETURN_NONE; }
        if (key.n == 1 && key.p[0] >= 'a' && key.p[0] <= 'n') {
            int i = key.p[0] - 'a';
            if (f[i].p) Py_RETURN_NONE;
            f[i] = value;
        }
    }
    /* a b c: producer group, topic, default topic (required); d..h ints (required) */
    for (int i = 0; i < 8; i++) if (!f[i].p) Py_RETURN_NONE;
    long long nums[14];
    for (int i = 3; i < 8; i++) if (lane_parse_int(f[i], &nums[i]) < 0) Py_RETURN_NONE;
    long long reconsume = 0, unused;
    if (f[9].p && lane_parse_int(f[9], &reconsume) < 0) Py_RETURN_NONE;     /* j */
    if (f[11].p && lane_parse_int(f[11], &unused) < 0) Py_RETURN_NONE;      /* l */
    if (f[10].p && !span_is(f[10], "false") && !span_is(f[10], "true")) Py_RETURN_NONE;  /* k */
    if (f[12].p && !span_is(f[12], "false")) Py_RETURN_NONE;               /* m: a batch */
    long long queue_id = nums[4], sys_flag = nums[5], born_ts = nums[6], mflag = nums[7];
    if (queue_id < 0 || queue_id > 0x7FFFFFFF || (sys_flag & 0xC) || sys_flag < 0 || sys_flag > 0x7FFFFFFF
            || mflag < -2147483648LL || mflag > 0x7FFFFFFF || reconsume < -2147483648LL || reconsume > 0x7FFFFFFF)
        Py_RETURN_NONE;
    span topic_s = f[1];
    if (topic_s.n < 1 || topic_s.n > 127 || !lane_ascii(topic_s)) Py_RETURN_NONE;
    if (topic_s.n >= 7 && memcmp(topic_s.p, "%RETRY%", 7) == 0) Py_RETURN_NONE;

    PyObject *refs_obj = PyObject_GetAttr(args[0], lattr[LA_REFS]);
    if (!refs_obj) return NULL;
    if (!PyTuple_Check(refs_obj) || PyTuple_GET_SIZE(refs_obj) != N_LREFS) {
        Py_DECREF(refs_obj);
        PyErr_SetString(PyExc_TypeError, "lane.refs is not the lane's tuple");
        return NULL;
    }
    PyObject **refs = &PyTuple_GET_ITEM(refs_obj, 0);
    PyObject *result = NULL;  /* set on every exit below */
    PyObject *topic = NULL, *key = NULL, *cq = NULL, *cq_queue = NULL, *cq_files = NULL, *cq_mf = NULL;
    PyObject *mfq = NULL, *files = NULL, *mf = NULL, *qtable = NULL, *born = NULL, *index_f = NULL;
    PyObject *uniq = NULL, *keys = NULL, *small = NULL, *tmp = NULL, *qo_obj = NULL;
    Py_buffer cl_buf = {0}, cq_buf = {0};
    int cl_got = 0, cq_got = 0, written = 0;

    /* the properties: name\x01value items, \x02 between them (empty items are dropped, as parse_properties does) */
    span names[LANE_MAX_PROPS], values[LANE_MAX_PROPS];
    int np = 0;
    span tags = {NULL, 0}, uniq_s = {NULL, 0}, keys_s = {NULL, 0}, shard_s = {NULL, 0};
    if (f[8].p) {
        const unsigned char *p = f[8].p, *end = f[8].p + f[8].n;
        while (p <= end) {
            const unsigned char *e = memchr(p, 2, end - p);
            if (!e) e = end;
            if (e > p) {
                const unsigned char *s1 = memchr(p, 1, e - p);
                if (!s1 || s1 == p || s1 + 1 >= e || memchr(s1 + 1, 1, e - s1 - 1) || np == LANE_MAX_PROPS) goto fallback;
                span name = {p, s1 - p}, value = {s1 + 1, e - s1 - 1};
                if (!lane_ascii(name)) goto fallback;
                for (int i = 0; i < np; i++)
                    if (names[i].n == name.n && memcmp(names[i].p, name.p, name.n) == 0) goto fallback;
                PyObject *fb = refs[LR_FALLBACK];  /* names that send the message the ordinary way */
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fb); i++) {
                    PyObject *b = PyTuple_GET_ITEM(fb, i);
                    if (PyBytes_GET_SIZE(b) == name.n && memcmp(PyBytes_AS_STRING(b), name.p, name.n) == 0) goto fallback;
                }
                if (span_is(name, "TAGS")) tags = value;
                else if (span_is(name, "UNIQ_KEY")) uniq_s = value;
                else if (span_is(name, "KEYS")) keys_s = value;
                else if (span_is(name, "__SHARDINGKEY")) shard_s = value;
                if (!span_is(name, "WAIT")) { names[np] = name; values[np] = value; np++; }
            }
            p = e + 1;
        }
    }
    if (tags.p && !lane_ascii(tags)) goto fallback;
    if (np == LANE_MAX_PROPS) goto fallback;
    span cluster = {(const unsigned char *)PyBytes_AS_STRING(refs[LR_CLUSTER]), PyBytes_GET_SIZE(refs[LR_CLUSTER])};
    names[np] = (span){(const unsigned char *)"CLUSTER", 7};
    values[np] = cluster;
    np++;
    /* stored in a Java HashMap's order: by bucket of the name's hash, then as put */
    int order[LANE_MAX_PROPS];
    unsigned buckets[LANE_MAX_PROPS];
    unsigned capacity = 16;
    while ((unsigned)np > capacity * 3 / 4) capacity <<= 1;
    Py_ssize_t props_len = np - 1;
    for (int i = 0; i < np; i++) {
        uint32_t hh = ascii_hash(names[i].p, names[i].n);
        buckets[i] = (hh ^ (hh >> 16)) & (capacity - 1);
        props_len += names[i].n + 1 + values[i].n;
        int j = i;
        while (j > 0 && buckets[order[j - 1]] > buckets[i]) { order[j] = order[j - 1]; j--; }
        order[j] = i;
    }
    if (props_len > 32767) goto fallback;

    /* the topic: one the processor checked, with the same config, writable, and the queue in range */
    topic = PyUnicode_DecodeASCII((const char *)topic_s.p, topic_s.n, NULL);
    if (!topic) goto error;
    PyObject *entry = PyDict_GetItemWithError(refs[LR_TOPICS], topic);  /* borrowed: (tc, topic bytes, prefix) */
    if (!entry) { if (PyErr_Occurred()) goto error; goto fallback; }
    PyObject *tc = PyTuple_GET_ITEM(entry, 0);
    PyObject *now_tc = PyDict_GetItemWithError(refs[LR_TABLE], topic);
    if (now_tc != tc) { if (PyErr_Occurred()) goto error; goto fallback; }
    long long perm, broker_perm, wqn;
    if (lane_int(tc, LA_PERM, &perm) < 0 || lane_int(refs[LR_CONFIG], LA_BROKER_PERM, &broker_perm) < 0
            || lane_int(tc, LA_WRITE_QUEUE_NUMS, &wqn) < 0) goto error;
    if (!(perm & 2) || !(broker_perm & 2) || queue_id >= wqn) goto fallback;

    /* the sender's address, as the ordinary path looked it up: IPv4 only */
    PyObject *attrs = PyObject_GetAttr(conn, lattr[LA_ATTRIBUTES]);
    if (!attrs) goto error;
    born = PyDict_GetItemWithError(attrs, refs[LR_BORN_V4_KEY]);
    if (born) Py_INCREF(born);
    else if (!PyErr_Occurred()) {
        PyObject *host_port = PyDict_GetItemWithError(attrs, refs[LR_BORN_KEY]);
        if (host_port && PyTuple_Check(host_port) && PyTuple_GET_SIZE(host_port) == 2
                && PyUnicode_Check(PyTuple_GET_ITEM(host_port, 0))) {
            const char *text = PyUnicode_AsUTF8(PyTuple_GET_ITEM(host_port, 0));
            unsigned char raw[4];
            int a, b, c, e2, n = 0;
            char canon[16];
            if (text && sscanf(text, "%d.%d.%d.%d%n", &a, &b, &c, &e2, &n) == 4 && text[n] == 0
                    && a >= 0 && a < 256 && b >= 0 && b < 256 && c >= 0 && c < 256 && e2 >= 0 && e2 < 256
                    && snprintf(canon, sizeof canon, "%d.%d.%d.%d", a, b, c, e2) > 0 && strcmp(canon, text) == 0) {
                raw[0] = (unsigned char)a; raw[1] = (unsigned char)b; raw[2] = (unsigned char)c; raw[3] = (unsigned char)e2;
                born = Py_BuildValue("(y#O)", (const char *)raw, (Py_ssize_t)4, PyTuple_GET_ITEM(host_port, 1));
                if (!born || PyDict_SetItem(attrs, refs[LR_BORN_V4_KEY], born) < 0) { Py_DECREF(attrs); goto error; }
            }
            if (!text) PyErr_Clear();
        }
    }
    Py_DECREF(attrs);
    if (!born) { if (PyErr_Occurred()) goto error; goto fallback; }
    long long born_port = PyLong_AsLongLong(PyTuple_GET_ITEM(born, 1));
    if (born_port == -1 && PyErr_Occurred()) goto error;

    /* the store takes it now */
    PyObject *store = refs[LR_STORE], *commitlog = refs[LR_COMMITLOG];
    int t;
    if ((t = lane_true(store, LA_RUNNING)) != 1) { if (t < 0) goto error; goto fallback; }
    if ((t = lane_true(store, LA_SLAVE)) != 0) { if (t < 0) goto error; goto fallback; }
    if ((t = lane_true(store, LA_DISK_FULL)) != 0) { if (t < 0) goto error; goto fallback; }
    if ((t = lane_none(store, LA_GATE)) != 1) { if (t < 0) goto error; goto fallback; }

    /* the record's size and offsets */
    Py_ssize_t body_len = size - 4 - hlen;
    PyObject *topic_b = PyTuple_GET_ITEM(entry, 1);
    long long total = RECORD_HEAD_V4 + body_len + 1 + PyBytes_GET_SIZE(topic_b) + 2 + props_len;
    long long max_msg, cl_file_size;
    if (lane_int(commitlog, LA_MAX_MSG, &max_msg) < 0 || lane_int(commitlog, LA_FILE_SIZE, &cl_file_size) < 0) goto error;
    if (total > max_msg || total + 8 > cl_file_size) goto fallback;
    qo_obj = PyLong_FromLongLong(queue_id);
    if (!qo_obj) goto error;
    key = PyTuple_Pack(2, topic, qo_obj);
    Py_CLEAR(qo_obj);
    if (!key) goto error;
    qtable = PyObject_GetAttr(commitlog, lattr[LA_QTABLE]);
    if (!qtable) goto error;
    long long qo = 0;
    PyObject *qv = PyDict_GetItemWithError(qtable, key);
    if (qv) { qo = PyLong_AsLongLong(qv); if (qo == -1 && PyErr_Occurred()) goto error; }
    else if (PyErr_Occurred()) goto error;

    /* the consume queue: made, mapped, no ext, nothing waiting, room in its last file at the next unit */
    tmp = PyObject_GetAttr(store, lattr[LA_CQS]);
    if (!tmp) goto error;
    cq = PyDict_GetItemWithError(tmp, key);
    Py_CLEAR(tmp);
    if (!cq) { if (PyErr_Occurred()) goto error; goto fallback; }
    Py_INCREF(cq);
    if ((t = lane_none(cq, LA_EXT)) != 1) { if (t < 0) goto error; goto fallback; }
    if ((t = lane_none(cq, LA_PENDING)) != 1) { if (t < 0) goto error; goto fallback; }
    if ((t = lane_true(cq, LA_MAPPED)) != 1) { if (t < 0) goto error; goto fallback; }
    long long cq_file_size, cq_wrote, cq_from, cq_max_phy;
    if (lane_int(cq, LA_FILE_SIZE, &cq_file_size) < 0 || lane_int(cq, LA_MAX_PHY, &cq_max_phy) < 0) goto error;
    cq_queue = PyObject_GetAttr(cq, lattr[LA_QUEUE]);
    if (!cq_queue) goto error;
    cq_files = PyObject_GetAttr(cq_queue, lattr[LA_FILES]);
    if (!cq_files) goto error;
    if (!PyList_Check(cq_files) || PyList_GET_SIZE(cq_files) == 0) goto fallback;
    cq_mf = Py_NewRef(PyList_GET_ITEM(cq_files, PyList_GET_SIZE(cq_files) - 1));
    if (lane_int(cq_mf, LA_WROTE, &cq_wrote) < 0 || lane_int(cq_mf, LA_FROM, &cq_from) < 0) goto error;
    if (cq_wrote + 20 > cq_file_size || cq_from + cq_wrote != qo * 20) goto fallback;

    /* the commit log: room in its last file, the next one on its way */
    mfq = PyObject_GetAttr(commitlog, lattr[LA_QUEUE]);
    if (!mfq) goto error;
    if ((t = lane_none(mfq, LA_NEXT)) != 0) { if (t < 0) goto error; goto fallback; }
    files = PyObject_GetAttr(mfq, lattr[LA_FILES]);
    if (!files) goto error;
    if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0) goto fallback;
    mf = Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
    long long wrote, mf_size, mf_from;
    if (lane_int(mf, LA_WROTE, &wrote) < 0 || lane_int(mf, LA_FILE_SIZE, &mf_size) < 0
            || lane_int(mf, LA_FROM, &mf_from) < 0) goto error;
    if (wrote >= mf_size || total + 8 > mf_size - wrote) goto fallback;
    long long phys = mf_from + wrote;
    if (phys + total <= cq_max_phy) goto fallback;

    /* the index: its last file with room for every key, nothing waiting, no spare needed yet */
    PyObject *index = refs[LR_INDEX];
    int n_entries = 0;
    if (uniq_s.p && uniq_s.n) n_entries++;
    if (keys_s.p) {
        for (Py_ssize_t i = 0; i < keys_s.n;) {
            while (i < keys_s.n && keys_s.p[i] == ' ') i++;
            if (i >= keys_s.n) break;
            n_entries++;
            while (i < keys_s.n && keys_s.p[i] != ' ') i++;
        }
    }
    if (index != Py_None) {
        if ((t = lane_none(index, LA_PENDING)) != 1) { if (t < 0) goto error; goto fallback; }
        tmp = PyObject_GetAttr(index, lattr[LA_FILES]);
        if (!tmp) goto error;
        if (!PyList_Check(tmp) || PyList_GET_SIZE(tmp) == 0) goto fallback;
        index_f = Py_NewRef(PyList_GET_ITEM(tmp, PyList_GET_SIZE(tmp) - 1));
        Py_CLEAR(tmp);
        long long count, inum, end_phy;
        if (lane_int(index_f, LA_INDEX_COUNT, &count) < 0 || lane_int(index, LA_INDEX_NUM, &inum) < 0
                || lane_int(index_f, LA_END_PHY, &end_phy) < 0) goto error;
        tmp = PyObject_GetAttr(index, lattr[LA_SPARE]);
        if (!tmp) goto error;
        int no_spare = tmp == Py_None;
        Py_CLEAR(tmp);
        if (count >= inum || (no_spare && count * 2 > inum) || count + n_entries > inum || phys < end_phy) goto fallback;
        if (uniq_s.p && uniq_s.n) { uniq = PyUnicode_DecodeUTF8((const char *)uniq_s.p, uniq_s.n, NULL); if (!uniq) goto error; }
        if (keys_s.p && keys_s.n) { keys = PyUnicode_DecodeUTF8((const char *)keys_s.p, keys_s.n, NULL); if (!keys) goto error; }
    }
    if (shard_s.p) {
        small = Py_BuildValue("{s:s#}", "__SHARDINGKEY", (const char *)shard_s.p, shard_s.n);
        if (!small) goto error;
    }

    /* the store time, as append_message takes it */
    tmp = PyObject_CallMethodNoArgs(store, lattr[LA_CLOCK]);
    if (!tmp) goto error;
    double now_s = PyFloat_AsDouble(tmp);
    Py_CLEAR(tmp);
    if (now_s == -1.0 && PyErr_Occurred()) goto error;
    long long store_ts = (long long)(now_s * 1000);

    /* ---- writes: nothing above has changed anything ---- */
    PyObject *mm = PyObject_GetAttr(mf, lattr[LA_MM]);
    if (!mm) goto error;
    int brc = PyObject_GetBuffer(mm, &cl_buf, PyBUF_WRITABLE);
    Py_DECREF(mm);
    if (brc < 0) goto error;
    cl_got = 1;
    PyObject *cqmm = PyObject_GetAttr(cq_mf, lattr[LA_MM]);
    if (!cqmm) goto error;
    brc = PyObject_GetBuffer(cqmm, &cq_buf, PyBUF_WRITABLE);
    Py_DECREF(cqmm);
    if (brc < 0) goto error;
    cq_got = 1;
    if (wrote + total > cl_buf.len || cq_wrote + 20 > cq_buf.len) goto fallback;
    PyObject *body_view = PyMemoryView_FromMemory((char *)d + 4 + hlen, body_len, PyBUF_READ);
    if (!body_view) goto error;
    tmp = PyObject_CallOneArg(crc32_fn, body_view);
    Py_DECREF(body_view);
    if (!tmp) goto error;
    unsigned long crc = PyLong_AsUnsignedLong(tmp);
    Py_CLEAR(tmp);
    if (crc == (unsigned long)-1 && PyErr_Occurred()) goto error;
    PyObject *store_ip = refs[LR_STORE_IP];
    long long store_port;  /* read each time: an ephemeral listen sets it after the lane is made */
    if (lane_int(refs[LR_CONFIG], LA_LISTEN_PORT, &store_port) < 0) goto error;
    {
        unsigned char *p = (unsigned char *)cl_buf.buf + wrote;
        put32(p, (uint32_t)total); p += 4;
        put32(p, 0xDAA320A7u); p += 4;
        put32(p, (uint32_t)(crc & 0x7FFFFFFF)); p += 4;
        put32(p, (uint32_t)queue_id); p += 4;
        put32(p, (uint32_t)mflag); p += 4;
        put64(p, (uint64_t)qo); p += 8;
        put64(p, (uint64_t)phys); p += 8;
        put32(p, (uint32_t)(sys_flag & ~0x30)); p += 4;
        put64(p, (uint64_t)born_ts); p += 8;
        memcpy(p, PyBytes_AS_STRING(PyTuple_GET_ITEM(born, 0)), 4); p += 4;
        put32(p, (uint32_t)born_port); p += 4;
        put64(p, (uint64_t)store_ts); p += 8;
        memcpy(p, PyBytes_AS_STRING(store_ip), 4); p += 4;
        put32(p, (uint32_t)store_port); p += 4;
        put32(p, (uint32_t)reconsume); p += 4;
        put64(p, 0); p += 8;
        put32(p, (uint32_t)body_len); p += 4;
        memcpy(p, d + 4 + hlen, body_len); p += body_len;
        *p++ = (unsigned char)PyBytes_GET_SIZE(topic_b);
        memcpy(p, PyBytes_AS_STRING(topic_b), PyBytes_GET_SIZE(topic_b)); p += PyBytes_GET_SIZE(topic_b);
        p[0] = (unsigned char)(props_len >> 8); p[1] = (unsigned char)props_len; p += 2;
        for (int k = 0; k < np; k++) {
            int i = order[k];
            if (k) *p++ = 2;
            memcpy(p, names[i].p, names[i].n); p += names[i].n;
            *p++ = 1;
            memcpy(p, values[i].p, values[i].n); p += values[i].n;
        }
    }
    /* then everything the Python path changes, in its order. The message is stored: a failure from
     * here on is reported as unraisable, never raised (the ordinary path would store it again), and
     * one that leaves no answer returns b"" (the client's send times out) */
    written = 1;
    if (lane_set_int(mf, LA_WROTE, wrote + total) < 0) PyErr_WriteUnraisable(args[0]);
    tmp = PyLong_FromLongLong(qo + 1);
    if (!tmp || PyDict_SetItem(qtable, key, tmp) < 0) PyErr_WriteUnraisable(args[0]);
    Py_CLEAR(tmp);
    if (lane_set_int(commitlog, LA_LAST_TS, store_ts) < 0) PyErr_WriteUnraisable(args[0]);
    PyObject *synced = refs[LR_SYNCED];  /* SYNC_FLUSH: the put is timed, and answered, at its sync */
    if (synced == Py_None) {   /* StoreTimes: a put of 0 ms */
        PyObject *times = PyObject_GetAttr(store, lattr[LA_TIMES]);
        long long window_end = 0;
        if (!times || lane_int(times, LA_WINDOW_END, &window_end) < 0) PyErr_WriteUnraisable(args[0]);
        else if (store_ts < window_end) {
            for (int which = LA_COUNTS; which <= LA_LATENCY; which++) {
                PyObject *lst = PyObject_GetAttr(times, lattr[which]);
                if (!lst || !PyList_Check(lst) || PyList_GET_SIZE(lst) == 0) { Py_XDECREF(lst); PyErr_WriteUnraisable(args[0]); continue; }
                long long n0 = PyLong_AsLongLong(PyList_GET_ITEM(lst, 0));
                PyObject *one = (n0 == -1 && PyErr_Occurred()) ? NULL : PyLong_FromLongLong(n0 + 1);
                if (!one || PyList_SetItem(lst, 0, one) < 0) PyErr_WriteUnraisable(args[0]);
                Py_DECREF(lst);
            }
        } else {
            tmp = PyObject_CallMethod(times, "put", "iL", 0, store_ts);
            if (!tmp) PyErr_WriteUnraisable(args[0]);
            Py_CLEAR(tmp);
        }
        Py_XDECREF(times);
    }
    {   /* the consume queue unit (ConsumeQueue.put_next) */
        long long tags_code = 0;
        if (tags.p && tags.n) tags_code = (int32_t)ascii_hash(tags.p, tags.n);
        unsigned char *u = (unsigned char *)cq_buf.buf + cq_wrote;
        put64(u, (uint64_t)phys); put32(u + 8, (uint32_t)total); put64(u + 12, (uint64_t)tags_code);
        if (PyObject_SetAttr(cq, lattr[LA_USED], Py_True) < 0) PyErr_WriteUnraisable(args[0]);
        if (lane_set_int(cq_mf, LA_WROTE, cq_wrote + 20) < 0) PyErr_WriteUnraisable(args[0]);
        if (lane_set_int(cq, LA_MAX_PHY, phys + total) < 0) PyErr_WriteUnraisable(args[0]);
        long long mark_at = 0;
        if (lane_int(cq, LA_PREALLOC, &mark_at) < 0) PyErr_WriteUnraisable(args[0]);
        else if (cq_wrote + 20 >= mark_at) {
            tmp = PyObject_GetAttr(cq_queue, lattr[LA_NEXT]);
            if (!tmp) PyErr_WriteUnraisable(args[0]);
            else if (tmp == Py_None) {
                PyObject *r = PyObject_CallMethodNoArgs(cq_queue, lattr[LA_PREPARE_NEXT]);
                if (!r) PyErr_WriteUnraisable(args[0]);
                Py_XDECREF(r);
            }
            Py_CLEAR(tmp);
        }
        if (PySet_Add(refs[LR_DIRTY_CQS], cq) < 0) PyErr_WriteUnraisable(args[0]);
    }
    if (index_f) {  /* the index entries (IndexService.dispatch) */
        PyObject *prefix = PyTuple_GET_ITEM(entry, 2);
        PyObject *ia[6] = {index_f, prefix, uniq ? uniq : Py_None, keys ? keys : Py_None, NULL, NULL};
        ia[4] = PyLong_FromLongLong(phys);
        ia[5] = PyLong_FromLongLong(store_ts);
        PyObject *r = (ia[4] && ia[5]) ? index_put_keys(NULL, ia, 6) : NULL;
        if (!r) PyErr_WriteUnraisable(args[0]);
        Py_XDECREF(r);
        Py_XDECREF(ia[4]);
        Py_XDECREF(ia[5]);
        PyObject *dirty = PyObject_GetAttr(index, lattr[LA_DIRTY]);
        if (!dirty || PySet_Add(dirty, index_f) < 0) PyErr_WriteUnraisable(args[0]);
        Py_XDECREF(dirty);
    }
    if (lane_set_int(refs[LR_PIPELINE], LA_DISPATCHED_TS, store_ts) < 0) PyErr_WriteUnraisable(args[0]);
    {   /* the arrival listeners (long polling, POP, statistics), as append_message tells them */
        int listening = lane_true(store, LA_LISTENERS);
        if (listening < 0) PyErr_WriteUnraisable(args[0]);
        else if (listening) {
            PyObject *r = PyObject_CallMethod(store, "_arrive", "OLL", topic, queue_id, qo + 1);
            if (!r) PyErr_WriteUnraisable(args[0]);
            Py_XDECREF(r);
        }
    }
    {   /* the 5.x metrics' count, as SendProcessor counts a stored send */
        PyObject *r = PyObject_CallMethod(refs[LR_STATS], "on_put", "OOOiL", topic, small ? small : refs[LR_EMPTY],
                                          Py_False, 1, total);
        if (!r) PyErr_WriteUnraisable(args[0]);
        Py_XDECREF(r);
    }
    {   /* the answer, or under SYNC_FLUSH its wait for the group commit */
        PyObject *ma[3] = {store_ip, NULL, NULL};
        ma[1] = PyLong_FromLongLong(store_port);
        ma[2] = PyLong_FromLongLong(phys);
        PyObject *msg_id = ma[1] && ma[2] ? offset_msg_id(NULL, ma, 3) : NULL;
        Py_XDECREF(ma[1]);
        Py_XDECREF(ma[2]);
        if (!msg_id) goto error;
        if (synced != Py_None) {
            PyObject *r = PyObject_CallFunction(synced, "OiLLLOLL", conn, (int)opaque, queue_id, phys, total, msg_id,
                                                qo, store_ts);
            Py_DECREF(msg_id);
            if (!r) goto error;
            Py_DECREF(r);
            result = PyBytes_FromStringAndSize(NULL, 0);
            if (!result) goto error;
            goto done;
        }
        PyObject *region = PyObject_GetAttr(refs[LR_CONFIG], lattr[LA_REGION]);
        int trace_on = lane_true(refs[LR_CONFIG], LA_TRACE_ON);
        if (!region || trace_on < 0 || !PyUnicode_Check(region)) {
            if (region && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "regionId is not a str");
            Py_XDECREF(region);
            Py_DECREF(msg_id);
            goto error;
        }
        PyObject *fa[7] = {NULL, NULL, region, lattr[trace_on ? LA_TRUE : LA_FALSE], msg_id, NULL, NULL};
        fa[0] = PyLong_FromLong(0);
        fa[1] = PyLong_FromLong(opaque);
        fa[5] = PyLong_FromLongLong(queue_id);
        fa[6] = PyLong_FromLongLong(qo);
        if (fa[0] && fa[1] && fa[5] && fa[6]) result = send_answer_frame(NULL, fa, 7);
        Py_XDECREF(fa[0]); Py_XDECREF(fa[1]); Py_XDECREF(fa[5]); Py_XDECREF(fa[6]);
        Py_DECREF(region);
        Py_DECREF(msg_id);
        if (!result) goto error;
    }
    goto done;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
    if (written) {
        PyErr_WriteUnraisable(args[0]);
        result = PyBytes_FromStringAndSize(NULL, 0);
    }
done:
    if (cl_got) PyBuffer_Release(&cl_buf);
    if (cq_got) PyBuffer_Release(&cq_buf);
    Py_XDECREF(tmp); Py_XDECREF(topic); Py_XDECREF(key); Py_XDECREF(cq); Py_XDECREF(cq_queue); Py_XDECREF(cq_files);
    Py_XDECREF(cq_mf); Py_XDECREF(mfq); Py_XDECREF(files); Py_XDECREF(mf); Py_XDECREF(qtable); Py_XDECREF(born);
    Py_XDECREF(index_f); Py_XDECREF(uniq); Py_XDECREF(keys); Py_XDECREF(small); Py_XDECREF(qo_obj);
    Py_DECREF(refs_obj);
    return result;
}

/* ---- Committer: the SYNC_FLUSH group commit thread, never taking the GIL ----------------------
 *
 * Twin of rmqtx.store.committer.PyCommitter (read its docstrings for the why). One pthread syncs
 * the commit log's files (dup'ed descriptors) up to the target the reactor sets with written(), and
 * signals each synced offset by writing 1 to an eventfd (or pipe) the reactor reads. State shared
 * with the thread lives under `mu`; only the thread closes descriptors while it runs (so a sync in
 * flight never sees its descriptor closed), then stop() or dealloc after the join.
 */

#define RETRY_NS 100000000L /* a failed sync is tried again after 100 ms */

typedef struct { int fd; long long end; unsigned long long gen; } cfile;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int efd;         /* set before the thread starts, never changed */
    int mu_ready, cv_ready;
    int started;     /* the thread runs and nobody joins it yet: read and written with the GIL only */
    int joined;      /* the thread has ended: its descriptors are ours (GIL only) */
    /* under mu */
    int running, hold, parked, err;
    long long target, synced, syncs;
    unsigned long long gen;
    cfile *files;
    Py_ssize_t nfiles, cap;
    int *batch;      /* the thread's own: descriptors of one sync round */
    Py_ssize_t batch_cap;
} Committer;

static void committer_signal(int efd) {
    uint64_t one = 1;
    /* EAGAIN: the counter (or pipe) is full and the reactor reads it anyway */
    while (write(efd, &one, sizeof one) < 0 && errno == EINTR) {}
}

/* Close the files a rebase forgot and the wholly synced ones (never the last); with mu, by the thread. */
static void committer_prune(Committer *c) {
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < c->nfiles; i++) {
        cfile f = c->files[i];
        if (f.gen != c->gen || (f.end <= c->synced && i < c->nfiles - 1)) {
            close(f.fd);
            continue;
        }
        c->files[k++] = f;
    }
    c->nfiles = k;
}

static void *committer_main(void *arg) {
    Committer *c = (Committer *)arg;
    pthread_mutex_lock(&c->mu);
    while (c->running) {
        committer_prune(c);
        if (c->target <= c->synced) {
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        long long t = c->target;
        unsigned long long g = c->gen;
        int err = 0;
        Py_ssize_t n = 0;
        if (c->batch_cap < c->nfiles) {
            int *grown = realloc(c->batch, (size_t)c->nfiles * sizeof(int));
            if (grown) { c->batch = grown; c->batch_cap = c->nfiles; } else err = ENOMEM;
        }
        if (!err)
            for (Py_ssize_t i = 0; i < c->nfiles; i++)
                if (c->files[i].end > c->synced) c->batch[n++] = c->files[i].fd;
        while (c->hold && c->running) { /* test control: a disk that hangs with this sync started */
            c->parked = 1;
            pthread_cond_wait(&c->cv, &c->mu);
        }
        c->parked = 0;
        if (!c->running) break;
        pthread_mutex_unlock(&c->mu);
        for (Py_ssize_t i = 0; i < n && !err; i++)
            while (fdatasync(c->batch[i]) != 0) {
                if (errno != EINTR) { err = errno; break; }
            }
        pthread_mutex_lock(&c->mu);
        if (!err) c->syncs++;
        if (c->gen != g) continue; /* rebased meanwhile: t may lie past the cut */
        int tell = !err || err != c->err; /* a new errno is told once: the reactor logs it */
        c->err = err;
        if (!err && t > c->synced) c->synced = t;
        if (tell) { /* outside mu: a reader behind on a blocking pipe must not stall written() */
            pthread_mutex_unlock(&c->mu);
            committer_signal(c->efd);
            pthread_mutex_lock(&c->mu);
        }
        if (!err) continue;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += RETRY_NS;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
        while (c->running && c->gen == g)
            if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Stop and join the thread (GIL held on entry, released for the join). */
static void committer_join(Committer *c) {
    if (!c->started) return;
    c->started = 0; /* under the GIL: a second stop() returns at once */
    pthread_mutex_lock(&c->mu);
    c->running = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(c->thread, NULL);
    Py_END_ALLOW_THREADS
    c->joined = 1;
}

static void committer_close_files(Committer *c) {
    for (Py_ssize_t i = 0; i < c->nfiles; i++) close(c->files[i].fd);
    c->nfiles = 0;
}

static void committer_dealloc(Committer *c) {
    committer_join(c);
    committer_close_files(c);
    free(c->files);
    free(c->batch);
    if (c->cv_ready) pthread_cond_destroy(&c->cv);
    if (c->mu_ready) pthread_mutex_destroy(&c->mu);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *committer_error(int rc) {
    errno = rc;
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *committer_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"efd", "synced", NULL};
    int efd;
    long long synced;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iL:Committer", kwlist, &efd, &synced)) return NULL;
    if (efd < 0) {
        PyErr_SetString(PyExc_ValueError, "efd must be an open descriptor");
        return NULL;
    }
    Committer *c = (Committer *)type->tp_alloc(type, 0);
    if (!c) return NULL;
    c->efd = efd;
    c->target = c->synced = synced;
    c->running = 1;
    int rc = pthread_mutex_init(&c->mu, NULL);
    if (rc) goto fail;
    c->mu_ready = 1;
    pthread_condattr_t attr;
    rc = pthread_condattr_init(&attr);
    if (rc) goto fail;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* retry waits ignore wall clock jumps */
    if (!rc) rc = pthread_cond_init(&c->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc) goto fail;
    c->cv_ready = 1;
    sigset_t all, old; /* the thread takes no signals: they stay with Python's threads */
    sigfillset(&all);
    rc = pthread_sigmask(SIG_BLOCK, &all, &old);
    if (rc) goto fail;
    rc = pthread_create(&c->thread, NULL, committer_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) goto fail;
    c->started = 1;
    pthread_setname_np(c->thread, "rmqtx-committer"); /* as top -H and /proc show it; a failure is harmless */
    return (PyObject *)c;
fail:
    Py_DECREF(c);
    return committer_error(rc);
}

static PyObject *committer_add_file(Committer *c, PyObject *args) {
    int fd;
    long long end;
    if (!PyArg_ParseTuple(args, "iL:add_file", &fd, &end)) return NULL;
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return PyErr_SetFromErrno(PyExc_OSError);
    pthread_mutex_lock(&c->mu);
    if (!c->running) {
        pthread_mutex_unlock(&c->mu);
        close(dup_fd);
        PyErr_SetString(PyExc_ValueError, "the committer is stopped");
        return NULL;
    }
    if (c->nfiles == c->cap) {
        Py_ssize_t cap = c->cap ? c->cap * 2 : 4;
        cfile *grown = realloc(c->files, (size_t)cap * sizeof(cfile));
        if (!grown) {
            pthread_mutex_unlock(&c->mu);
            close(dup_fd);
            return PyErr_NoMemory();
        }
        c->files = grown;
        c->cap = cap;
    }
    c->files[c->nfiles++] = (cfile){dup_fd, end, c->gen};
    pthread_mutex_unlock(&c->mu);
    Py_RETURN_NONE;
}

static PyObject *committer_written(Committer *c, PyObject *arg) {
    long long offset = PyLong_AsLongLong(arg);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    pthread_mutex_lock(&c->mu);
    if (offset > c->target) {
        c->target = offset;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    Py_RETURN_NONE;
}

static PyObject *committer_synced(Committer *c, PyObject *unused) {
    pthread_mutex_lock(&c->mu);
    long long synced = c->synced, syncs = c->syncs;
    int err = c->err;
    pthread_mutex_unlock(&c->mu);
    return Py_BuildValue("(LLi)", synced, syncs, err);
}

static PyObject *committer_rebase(Committer *c, PyObject *arg) {
    long long offset = PyLong_AsLongLong(arg);
    if (offset == -1 && PyErr_Occurred()) return NULL;
    pthread_mutex_lock(&c->mu);
    if (offset < c->synced) c->synced = offset;
    c->target = c->synced;
    c->gen++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    Py_RETURN_NONE;
}

static PyObject *committer_set_hold(Committer *c, int hold) {
    pthread_mutex_lock(&c->mu);
    c->hold = hold;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    Py_RETURN_NONE;
}

static PyObject *committer_hold(Committer *c, PyObject *unused) { return committer_set_hold(c, 1); }

static PyObject *committer_release(Committer *c, PyObject *unused) { return committer_set_hold(c, 0); }

static PyObject *committer_held(Committer *c, PyObject *unused) {
    pthread_mutex_lock(&c->mu);
    int parked = c->parked;
    pthread_mutex_unlock(&c->mu);
    return PyBool_FromLong(parked);
}

static PyObject *committer_stop(Committer *c, PyObject *unused) {
    committer_join(c);
    if (c->joined) /* else another stop() joins it right now, and closes them */
        committer_close_files(c);
    Py_RETURN_NONE;
}

static PyMethodDef committer_methods[] = {
    {"add_file", (PyCFunction)committer_add_file, METH_VARARGS, "Sync a dup of fd from now on, for bytes below end_offset."},
    {"written", (PyCFunction)committer_written, METH_O, "Raise the offset to sync up to."},
    {"synced", (PyCFunction)committer_synced, METH_NOARGS, "(synced offset, syncs done, errno of the last failed sync or 0)."},
    {"rebase", (PyCFunction)committer_rebase, METH_O, "The log was cut at offset: forget the files, sync nothing past it."},
    {"hold", (PyCFunction)committer_hold, METH_NOARGS, "Test control: the next sync waits before its fdatasync."},
    {"release", (PyCFunction)committer_release, METH_NOARGS, "Test control: undo hold()."},
    {"held", (PyCFunction)committer_held, METH_NOARGS, "Test control: a sync waits at hold() now."},
    {"stop", (PyCFunction)committer_stop, METH_NOARGS, "Stop and join the thread, close the files (again: nothing)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CommitterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqtx._accel.Committer",
    .tp_basicsize = sizeof(Committer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Committer(efd, synced): the SYNC_FLUSH group commit thread; twin of rmqtx.store.committer.PyCommitter.",
    .tp_new = committer_new,
    .tp_dealloc = (destructor)committer_dealloc,
    .tp_methods = committer_methods,
};

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
    {"parse_properties", parse_properties, METH_O, "Message properties text to a dict, as Java splits it."},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL, "Write one index entry and link its hash slot."},
    {"send_v2_values", send_v2_values, METH_O, "SEND_MESSAGE_V2 short-name fields to SendMessageRequestHeader values, or None."},
    {"binary_frame_head", (PyCFunction)(void (*)(void))binary_frame_head, METH_FASTCALL, "Frame prefix and ROCKETMQ header of a command, in one bytes."},
    {"send_answer_frame", (PyCFunction)(void (*)(void))send_answer_frame, METH_FASTCALL, "The whole answer frame to a stored message."},
    {"offset_msg_id", (PyCFunction)(void (*)(void))offset_msg_id, METH_FASTCALL, "offsetMsgId of a store address and commit log offset."},
    {"decode_frame_payload", decode_frame_payload, METH_O, "A frame after its length prefix as a RemotingCommand."},
    {"configure_command", (PyCFunction)(void (*)(void))configure_command, METH_FASTCALL, "Tell decode_frame_payload what to build."},
    {"join_properties", (PyCFunction)(void (*)(void))join_properties, METH_FASTCALL, "Message properties dict to its string, in a given order."},
    {"index_put_keys", (PyCFunction)(void (*)(void))index_put_keys, METH_FASTCALL, "A record's index entries into an IndexFile, and its header."},
    {"scan_units", (PyCFunction)(void (*)(void))scan_units, METH_FASTCALL, "The plain run of a pull's consume-queue units: records copied out of one commit log file."},
    {"send_lane", (PyCFunction)(void (*)(void))send_lane, METH_FASTCALL, "A plain SEND_MESSAGE_V2 stored and answered, or None."},
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
    PyObject *st = PyImport_ImportModule("struct");
    if (!st) return NULL;
    struct_error = PyObject_GetAttrString(st, "error");
    Py_DECREF(st);
    if (!struct_error) return NULL;
    for (int i = 0; i < N_IATTR; i++) {
        iattr[i] = PyUnicode_InternFromString(iattr_names[i]);
        if (!iattr[i]) return NULL;
    }
    for (int i = 0; i < N_LATTR; i++) {
        lattr[i] = PyUnicode_InternFromString(lattr_names[i]);
        if (!lattr[i]) return NULL;
    }
    static const char *names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "l", "n"};
    for (int i = 0; i < 14; i++) {
        v2_keys[i] = PyUnicode_InternFromString(names[i]);
        if (!v2_keys[i]) return NULL;
    }
    if (PyType_Ready(&CommitterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Committer", (PyObject *)&CommitterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
