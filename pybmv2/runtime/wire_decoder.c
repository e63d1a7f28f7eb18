/* The WriteRequest decoder of pybmv2/runtime/wire.py, in C: the same values, the same
 * declines (None), byte for byte. wire.py documents the rules; this file follows its
 * Python functions one for one (_write_request, _uint128, _update, _entity, _table_entry,
 * _field_match, _match_value, _table_action, _action, _param) so that the two read alike.
 *
 * decode(data, EntryValue) -> (device_id, role, election_id, atomicity, updates) or None
 *
 * Reads past the end of the data see one zero byte, as the Python decoder's buffer ends
 * with one: a varint never runs off it, and a position past a message's end is rejected
 * by the check after each message loop (done()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *b;
    Py_ssize_t total;       /* bytes of data; at(total) is the virtual zero byte */
    PyObject *actions;      /* raw TableAction bytes -> its ActionValue (one request) */
    PyObject *entry_cls;    /* pybmv2.runtime.values.EntryValue */
} Buf;

/* -1: the request is outside what is decoded (None); -2: a Python exception is set */
#define UNSUPPORTED (-1)
#define PYERR (-2)

static PyObject *s_exact, *s_ternary, *s_lpm, *s_range, *s_optional, *s_action;

static inline unsigned at(const Buf *B, Py_ssize_t pos) {
    return pos < B->total ? B->b[pos] : 0;
}

static int varint(const Buf *B, Py_ssize_t *pos, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        unsigned b = at(B, *pos);
        result |= (uint64_t)(b & 0x7F) << shift;
        (*pos)++;
        if (!(b & 0x80)) {
            *out = result;
            return 0;
        }
        shift += 7;
        if (shift >= 64) return UNSUPPORTED;
    }
}

static int uint32v(const Buf *B, Py_ssize_t *pos, uint32_t *out) {
    uint64_t v;
    if (varint(B, pos, &v)) return UNSUPPORTED;
    *out = (uint32_t)v;
    return 0;
}

static int int32v(const Buf *B, Py_ssize_t *pos, int32_t *out) {
    uint64_t v;
    if (varint(B, pos, &v)) return UNSUPPORTED;
    *out = (int32_t)(uint32_t)v;
    return 0;
}

/* a length-delimited value whose length varint is at *pos: [*start, *pos) */
static int span(const Buf *B, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *start) {
    uint64_t n = at(B, *pos);
    (*pos)++;
    if (n >= 0x80) {
        (*pos)--;
        if (varint(B, pos, &n)) return UNSUPPORTED;
    }
    if (*pos > end || n > (uint64_t)(end - *pos)) return UNSUPPORTED;
    *start = *pos;
    *pos += (Py_ssize_t)n;
    return 0;
}

static PyObject *bytes_of(const Buf *B, Py_ssize_t start, Py_ssize_t stop) {
    return PyBytes_FromStringAndSize((const char *)B->b + start, stop - start);
}

/* ---- messages ------------------------------------------------------------------------ */

static int param(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    uint32_t param_id = 0;
    PyObject *value = NULL;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        if (tag == 0x10) {
            if (uint32v(B, &pos, &param_id)) goto unsupported;
        } else if (tag == 0x1A) {
            Py_ssize_t start;
            if (span(B, &pos, end, &start)) goto unsupported;
            Py_XDECREF(value);
            if (!(value = bytes_of(B, start, pos))) return PYERR;
        } else {
            goto unsupported;
        }
    }
    if (pos != end) goto unsupported;
    if (!value && !(value = PyBytes_FromStringAndSize("", 0))) return PYERR;
    *out = Py_BuildValue("(kN)", (unsigned long)param_id, value);
    return *out ? 0 : PYERR;
unsupported:
    Py_XDECREF(value);
    return UNSUPPORTED;
}

static int action(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    uint32_t action_id = 0;
    int rc = UNSUPPORTED;
    PyObject *params = PyList_New(0);
    if (!params) return PYERR;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        if (tag == 0x22) {
            Py_ssize_t start;
            PyObject *p;
            if (span(B, &pos, end, &start)) goto fail;
            if ((rc = param(B, start, pos, &p))) goto fail;
            rc = PyList_Append(params, p) ? PYERR : UNSUPPORTED;
            Py_DECREF(p);
            if (rc == PYERR) goto fail;
        } else if (tag == 0x08) {
            if (uint32v(B, &pos, &action_id)) goto fail;
        } else {
            goto fail;
        }
    }
    if (pos != end) goto fail;
    PyObject *tuple = PyList_AsTuple(params);
    Py_DECREF(params);
    if (!tuple) return PYERR;
    *out = Py_BuildValue("(kN)", (unsigned long)action_id, tuple);
    return *out ? 0 : PYERR;
fail:
    Py_DECREF(params);
    return rc;
}

static int table_action(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    PyObject *act = NULL;
    int rc;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        Py_ssize_t start;
        if (tag != 0x0A || act) goto unsupported;
        if (span(B, &pos, end, &start)) goto unsupported;
        if ((rc = action(B, start, pos, &act))) return rc;
    }
    if (pos != end || !act) goto unsupported;
    *out = act;
    return 0;
unsupported:
    Py_XDECREF(act);
    return UNSUPPORTED;
}

/* second_tag: 0 none, 0x10 an int32 (LPM's prefix_len), 0x12 bytes */
static int match_value(const Buf *B, Py_ssize_t pos, Py_ssize_t end, unsigned second_tag,
                       PyObject **first, PyObject **second) {
    PyObject *f = NULL, *s = NULL;
    int32_t plen = 0;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        Py_ssize_t start;
        if (tag == 0x0A) {
            if (span(B, &pos, end, &start)) goto unsupported;
            Py_XDECREF(f);
            if (!(f = bytes_of(B, start, pos))) goto pyerr;
        } else if (tag != second_tag || !second_tag) {
            goto unsupported;
        } else if (tag == 0x12) {
            if (span(B, &pos, end, &start)) goto unsupported;
            Py_XDECREF(s);
            if (!(s = bytes_of(B, start, pos))) goto pyerr;
        } else {
            if (int32v(B, &pos, &plen)) goto unsupported;
        }
    }
    if (pos != end) goto unsupported;
    if (!f && !(f = PyBytes_FromStringAndSize("", 0))) goto pyerr;
    if (second_tag == 0x12) {
        if (!s && !(s = PyBytes_FromStringAndSize("", 0))) goto pyerr;
    } else if (second_tag == 0x10) {
        if (!(s = PyLong_FromLong(plen))) goto pyerr;
    } else {
        s = Py_NewRef(Py_None);
    }
    *first = f;
    *second = s;
    return 0;
unsupported:
    Py_XDECREF(f);
    Py_XDECREF(s);
    return UNSUPPORTED;
pyerr:
    Py_XDECREF(f);
    Py_XDECREF(s);
    return PYERR;
}

static int field_match(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    uint32_t field_id = 0;
    PyObject *kind = NULL, *first = NULL, *second = NULL;
    int rc = UNSUPPORTED;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        if (tag == 0x08) {
            if (uint32v(B, &pos, &field_id)) goto fail;
            continue;
        }
        PyObject *k;
        unsigned second_tag;
        switch (tag) {  /* other = 100 (a two-byte tag) is not decoded */
        case 0x12: k = s_exact; second_tag = 0; break;
        case 0x1A: k = s_ternary; second_tag = 0x12; break;
        case 0x22: k = s_lpm; second_tag = 0x10; break;
        case 0x32: k = s_range; second_tag = 0x12; break;
        case 0x3A: k = s_optional; second_tag = 0; break;
        default: goto fail;
        }
        if (kind) goto fail;
        kind = k;
        Py_ssize_t start;
        if (span(B, &pos, end, &start)) goto fail;
        if ((rc = match_value(B, start, pos, second_tag, &first, &second))) goto fail;
        rc = UNSUPPORTED;
    }
    if (pos != end || !kind) goto fail;
    *out = Py_BuildValue("(kONN)", (unsigned long)field_id, kind, first, second);
    return *out ? 0 : PYERR;
fail:
    Py_XDECREF(first);
    Py_XDECREF(second);
    return rc;
}

static int table_entry(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    uint32_t table_id = 0;
    int32_t priority = 0;
    uint64_t controller_metadata = 0, idle = 0, flag;
    int is_default = 0, is_const = 0, rc = UNSUPPORTED;
    PyObject *metadata = NULL, *act = NULL, *matches = PyList_New(0);
    if (!matches) return PYERR;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        Py_ssize_t start;
        switch (tag) {
        case 0x12: {  /* match = 2 */
            PyObject *fm;
            if (span(B, &pos, end, &start)) goto fail;
            if ((rc = field_match(B, start, pos, &fm))) goto fail;
            rc = PyList_Append(matches, fm) ? PYERR : UNSUPPORTED;
            Py_DECREF(fm);
            if (rc == PYERR) goto fail;
            break;
        }
        case 0x08:  /* table_id = 1 */
            if (uint32v(B, &pos, &table_id)) goto fail;
            break;
        case 0x1A: {  /* action = 3 */
            if (act) goto fail;
            if (span(B, &pos, end, &start)) goto fail;
            PyObject *raw = bytes_of(B, start, pos);
            if (!raw) { rc = PYERR; goto fail; }
            act = PyDict_GetItemWithError(B->actions, raw);
            if (act) {
                Py_INCREF(act);
            } else if (PyErr_Occurred()) {
                Py_DECREF(raw);
                rc = PYERR;
                goto fail;
            } else {
                if ((rc = table_action(B, start, pos, &act))) { Py_DECREF(raw); goto fail; }
                rc = UNSUPPORTED;
                if (PyDict_SetItem(B->actions, raw, act)) { Py_DECREF(raw); rc = PYERR; goto fail; }
            }
            Py_DECREF(raw);
            break;
        }
        case 0x20:  /* priority = 4 */
            if (int32v(B, &pos, &priority)) goto fail;
            break;
        case 0x28:  /* controller_metadata = 5 */
            if (varint(B, &pos, &controller_metadata)) goto fail;
            break;
        case 0x40:  /* is_default_action = 8 */
            if (varint(B, &pos, &flag)) goto fail;
            is_default = flag != 0;
            break;
        case 0x48:  /* idle_timeout_ns = 9 (int64) */
            if (varint(B, &pos, &idle)) goto fail;
            break;
        case 0x5A:  /* metadata = 11 */
            if (span(B, &pos, end, &start)) goto fail;
            Py_XDECREF(metadata);
            if (!(metadata = bytes_of(B, start, pos))) { rc = PYERR; goto fail; }
            break;
        case 0x68:  /* is_const = 13 */
            if (varint(B, &pos, &flag)) goto fail;
            is_const = flag != 0;
            break;
        default:  /* meter_config, counter_data, time_since_last_hit, ... */
            goto fail;
        }
    }
    if (pos != end) goto fail;
    if (!metadata && !(metadata = PyBytes_FromStringAndSize("", 0))) { rc = PYERR; goto fail; }
    PyObject *mt = PyList_AsTuple(matches);
    if (!mt) { rc = PYERR; goto fail; }
    *out = PyObject_CallFunction(B->entry_cls, "kNOOlKNOOOOOL", (unsigned long)table_id, mt,
                                 act ? s_action : Py_None, act ? act : Py_None, (long)priority,
                                 (unsigned long long)controller_metadata, metadata,
                                 is_default ? Py_True : Py_False, is_const ? Py_True : Py_False,
                                 Py_False, Py_False, Py_None, (long long)(int64_t)idle);
    metadata = NULL;  /* "N" stole it */
    Py_DECREF(matches);
    Py_XDECREF(act);
    return *out ? 0 : PYERR;
fail:
    Py_DECREF(matches);
    Py_XDECREF(metadata);
    Py_XDECREF(act);
    return rc;
}

static int entity(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    PyObject *entry = NULL;
    int rc;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        Py_ssize_t start;
        if (tag != 0x12 || entry) goto unsupported;  /* table_entry = 2, once */
        if (span(B, &pos, end, &start)) goto unsupported;
        if ((rc = table_entry(B, start, pos, &entry))) return rc;
    }
    if (pos != end || !entry) goto unsupported;
    *out = entry;
    return 0;
unsupported:
    Py_XDECREF(entry);
    return UNSUPPORTED;
}

static int update(const Buf *B, Py_ssize_t pos, Py_ssize_t end, PyObject **out) {
    int32_t kind = 0;
    PyObject *entry = NULL;
    int rc;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        Py_ssize_t start;
        if (tag == 0x12) {  /* entity = 2 */
            if (entry) goto unsupported;
            if (span(B, &pos, end, &start)) goto unsupported;
            if ((rc = entity(B, start, pos, &entry))) return rc;
        } else if (tag == 0x08) {  /* type = 1 */
            if (int32v(B, &pos, &kind)) goto unsupported;
            if (kind < 0 || kind > 3) goto unsupported;
        } else {
            goto unsupported;
        }
    }
    if (pos != end || !entry) goto unsupported;
    *out = Py_BuildValue("(lN)", (long)kind, entry);
    return *out ? 0 : PYERR;
unsupported:
    Py_XDECREF(entry);
    return UNSUPPORTED;
}

static PyObject *uint128(const Buf *B, Py_ssize_t pos, Py_ssize_t end, int *rc) {
    uint64_t high = 0, low = 0;
    *rc = UNSUPPORTED;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        if (tag == 0x08) {
            if (varint(B, &pos, &high)) return NULL;
        } else if (tag == 0x10) {
            if (varint(B, &pos, &low)) return NULL;
        } else {
            return NULL;
        }
    }
    if (pos != end) return NULL;
    *rc = PYERR;
    PyObject *h = PyLong_FromUnsignedLongLong(high), *l = PyLong_FromUnsignedLongLong(low);
    PyObject *sixty_four = PyLong_FromLong(64), *shifted = NULL, *value = NULL;
    if (h && l && sixty_four && (shifted = PyNumber_Lshift(h, sixty_four)))
        value = PyNumber_Or(shifted, l);
    Py_XDECREF(h);
    Py_XDECREF(l);
    Py_XDECREF(sixty_four);
    Py_XDECREF(shifted);
    if (value) *rc = 0;
    return value;
}

static int write_request(const Buf *B, PyObject **out) {
    Py_ssize_t pos = 0, end = B->total;
    uint64_t device_id = 0, unused;
    int32_t atomicity = 0;
    int rc = UNSUPPORTED;
    PyObject *role = NULL, *election = NULL, *updates = PyList_New(0);
    if (!updates) return PYERR;
    while (pos < end) {
        unsigned tag = at(B, pos++);
        Py_ssize_t start;
        if (tag == 0x22) {  /* updates = 4 */
            PyObject *u;
            if (span(B, &pos, end, &start)) goto fail;
            if ((rc = update(B, start, pos, &u))) goto fail;
            rc = PyList_Append(updates, u) ? PYERR : UNSUPPORTED;
            Py_DECREF(u);
            if (rc == PYERR) goto fail;
        } else if (tag == 0x08) {  /* device_id = 1 */
            if (varint(B, &pos, &device_id)) goto fail;
        } else if (tag == 0x10) {  /* role_id = 2 (deprecated, unused) */
            if (varint(B, &pos, &unused)) goto fail;
        } else if (tag == 0x1A) {  /* election_id = 3 */
            if (election) goto fail;
            if (span(B, &pos, end, &start)) goto fail;
            if (!(election = uint128(B, start, pos, &rc))) goto fail;
            rc = UNSUPPORTED;
        } else if (tag == 0x28) {  /* atomicity = 5 */
            if (int32v(B, &pos, &atomicity)) goto fail;
            if (atomicity < 0 || atomicity > 2) goto fail;
        } else if (tag == 0x32) {  /* role = 6 */
            if (span(B, &pos, end, &start)) goto fail;
            Py_XDECREF(role);
            role = PyUnicode_DecodeUTF8((const char *)B->b + start, pos - start, "strict");
            if (!role) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { rc = PYERR; goto fail; }
                PyErr_Clear();
                goto fail;
            }
        } else {
            goto fail;
        }
    }
    if (pos != end) goto fail;
    if (!role && !(role = PyUnicode_FromString(""))) { rc = PYERR; goto fail; }
    *out = Py_BuildValue("(KNNlN)", (unsigned long long)device_id, role,
                         election ? election : Py_NewRef(Py_None), (long)atomicity, updates);
    return *out ? 0 : PYERR;
fail:
    Py_XDECREF(role);
    Py_XDECREF(election);
    Py_DECREF(updates);
    return rc;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *entry_cls, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*O:decode", &view, &entry_cls)) return NULL;
    Buf B = {view.buf, view.len, PyDict_New(), entry_cls};
    int rc = B.actions ? write_request(&B, &out) : PYERR;
    Py_XDECREF(B.actions);
    PyBuffer_Release(&view);
    if (rc == PYERR) return NULL;
    if (rc == UNSUPPORTED) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(data, EntryValue): (device_id, role, election_id, atomicity, updates) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pybmv2_wire_decoder", NULL, -1, methods};

PyMODINIT_FUNC PyInit_pybmv2_wire_decoder(void) {
    if (!(s_exact = PyUnicode_InternFromString("exact")) ||
        !(s_ternary = PyUnicode_InternFromString("ternary")) ||
        !(s_lpm = PyUnicode_InternFromString("lpm")) ||
        !(s_range = PyUnicode_InternFromString("range")) ||
        !(s_optional = PyUnicode_InternFromString("optional")) ||
        !(s_action = PyUnicode_InternFromString("action")))
        return NULL;
    return PyModule_Create(&module);
}
