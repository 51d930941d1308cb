/*
** A faster `unicode61` for text with Chinese, Japanese or Korean characters: the same
** tokens, byte for byte and offset for offset, as SQLite's own.
**
** Coffer writes a separator after every CJK character (fts_text.index_text), so each is a
** token of its own. SQLite's unicode61 reads such a character as any other: a category
** lookup, a case fold, a copy into its buffer. Here a character that unicode61 itself
** answers with one token equal to the character (probed once per process, by asking
** unicode61), standing between two separators (probed likewise), is handed to FTS5
** directly; every other stretch of text goes to unicode61. The two readings agree by
** construction, and tests/daemon/test_cjk_tokens.py compares them on every character and on
** random text.
**
** Loaded, it takes the name `unicode61` on its connection, over the built-in one it
** wraps: tables keep their declared tokenizer and are read alike by any SQLite. With
** options other than `remove_diacritics`, it is the built-in one.
*/
#include <string.h>

#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

#define BMP 0x10000
#define SUPP_FIRST 0x20000 /* CJK extensions B-G */
#define SUPP_LAST 0x3134F
#define FIRST_CJK 0x2E80 /* below: no character is taken as a token here */

/* Per code point: T, a token alone between separators, equal to itself; S, a separator */
static unsigned char aBmp[BMP];
static unsigned char aSupp[SUPP_LAST - SUPP_FIRST + 1];
#define CLASS_T 1
#define CLASS_S 2
static volatile int probed = 0;

typedef struct Parent Parent;
struct Parent {
  void *pUserData;
  fts5_tokenizer_v2 x;
};

typedef struct Tokenizer Tokenizer;
struct Tokenizer {
  Parent *pParent;
  Fts5Tokenizer *pReal;
  int bFast;
};

/* ------------------------------------------------------------------ probing */

typedef struct Probe Probe;
struct Probe {
  int n;
  char aTok[8];
  int nTok, iStart, iEnd;
};

static int probeToken(void *pCtx, int tflags, const char *p, int n, int iStart, int iEnd) {
  Probe *pProbe = (Probe *)pCtx;
  (void)tflags;
  if (pProbe->n++ == 0 && n <= (int)sizeof(pProbe->aTok)) {
    memcpy(pProbe->aTok, p, n);
    pProbe->nTok = n;
    pProbe->iStart = iStart;
    pProbe->iEnd = iEnd;
  }
  return SQLITE_OK;
}

static int utf8(unsigned int c, char *z) {
  if (c < 0x80) {
    z[0] = (char)c;
    return 1;
  }
  if (c < 0x800) {
    z[0] = (char)(0xC0 | (c >> 6));
    z[1] = (char)(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    z[0] = (char)(0xE0 | (c >> 12));
    z[1] = (char)(0x80 | ((c >> 6) & 0x3F));
    z[2] = (char)(0x80 | (c & 0x3F));
    return 3;
  }
  z[0] = (char)(0xF0 | (c >> 18));
  z[1] = (char)(0x80 | ((c >> 12) & 0x3F));
  z[2] = (char)(0x80 | ((c >> 6) & 0x3F));
  z[3] = (char)(0x80 | (c & 0x3F));
  return 4;
}

static int probeOne(Parent *p, Fts5Tokenizer *pTok, const char *z, int n, Probe *pOut) {
  memset(pOut, 0, sizeof(*pOut));
  return p->x.xTokenize(pTok, pOut, FTS5_TOKENIZE_DOCUMENT, z, n, 0, 0, probeToken);
}

/* T: " c " gives the one token c at 1..1+len; S: "a" c "b" gives two tokens */
static int probeClass(Parent *p, Fts5Tokenizer *pTok, unsigned int c) {
  char z[8];
  int n, rc, cls = 0;
  Probe probe;
  z[0] = ' ';
  n = utf8(c, &z[1]);
  z[1 + n] = ' ';
  rc = probeOne(p, pTok, z, n + 2, &probe);
  if (rc != SQLITE_OK) return -1;
  if (c >= FIRST_CJK && probe.n == 1 && probe.nTok == n && memcmp(probe.aTok, &z[1], n) == 0 &&
      probe.iStart == 1 && probe.iEnd == 1 + n) {
    cls |= CLASS_T;
  }
  z[0] = 'a';
  z[1 + n] = 'b';
  rc = probeOne(p, pTok, z, n + 2, &probe);
  if (rc != SQLITE_OK) return -1;
  if (probe.n == 2) cls |= CLASS_S;
  return cls;
}

static int probeAll(Parent *p) {
  Fts5Tokenizer *pTok = 0;
  unsigned int c;
  int cls, rc = p->x.xCreate(p->pUserData, 0, 0, &pTok);
  if (rc != SQLITE_OK) return rc;
  for (c = 0x80; c < BMP; c++) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    cls = probeClass(p, pTok, c);
    if (cls < 0) {
      rc = SQLITE_ERROR;
      break;
    }
    aBmp[c] = (unsigned char)cls;
  }
  for (c = SUPP_FIRST; rc == SQLITE_OK && c <= SUPP_LAST; c++) {
    cls = probeClass(p, pTok, c);
    if (cls < 0) rc = SQLITE_ERROR;
    else aSupp[c - SUPP_FIRST] = (unsigned char)(cls & CLASS_T);
  }
  p->x.xDelete(pTok);
  return rc;
}

/* ------------------------------------------------------------------ tokenizing */

static int isAsciiAlnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The character at z (n > 0 bytes left) read as unicode61 reads it (SQLite's READ_UTF8: a
** lead byte takes every continuation byte after it, and what is no character is U+FFFD):
** its code point, and its length in bytes. */
static const unsigned char aTrans1[] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
    0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19,
    0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
    0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x00, 0x01, 0x02, 0x03,
    0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
};

static int decode(const unsigned char *z, int n, unsigned int *pc) {
  unsigned int c = z[0];
  int len = 1;
  if (c >= 0xC0) {
    c = aTrans1[c - 0xC0];
    while (len < n && (z[len] & 0xC0) == 0x80) c = (c << 6) + (0x3F & z[len++]);
    if (c < 0x80 || (c & 0xFFFFF800) == 0xD800 || (c & 0xFFFFFFFE) == 0xFFFE) c = 0xFFFD;
  }
  *pc = c;
  return len;
}

/* Are these n bytes the one way UTF-8 writes their character (as unicode61 writes a token)? */
static int canonical(const unsigned char *z, int n, unsigned int c) {
  char a[4];
  return n <= 4 && utf8(c, a) == n && memcmp(a, z, n) == 0;
}

static int classOf(unsigned int c) {
  if (c < BMP) return aBmp[c];
  if (c >= SUPP_FIRST && c <= SUPP_LAST) return aSupp[c - SUPP_FIRST];
  return 0;
}

/* Is the text at z a separator to unicode61, or its end? */
static int separatorAt(const unsigned char *z, int n) {
  unsigned int c;
  if (n == 0) return 1;
  if (z[0] < 0x80) return !isAsciiAlnum(z[0]);
  decode(z, n, &c);
  return (classOf(c) & CLASS_S) != 0;
}

typedef struct Shifted Shifted;
struct Shifted {
  void *pCtx;
  int (*xToken)(void *, int, const char *, int, int, int);
  int iBase;
};

static int shiftedToken(void *pCtx, int tflags, const char *p, int n, int iStart, int iEnd) {
  Shifted *s = (Shifted *)pCtx;
  return s->xToken(s->pCtx, tflags, p, n, iStart + s->iBase, iEnd + s->iBase);
}

static int fastTokenize(Tokenizer *t, void *pCtx, int flags, const char *pText, int nText,
                        const char *pLocale, int nLocale,
                        int (*xToken)(void *, int, const char *, int, int, int)) {
  const unsigned char *z = (const unsigned char *)pText;
  Shifted shifted = {pCtx, xToken, 0};
  int i = 0, iSeg = 0, bContent = 0, bAfterSeparator = 1, n, rc;
  unsigned int c;
  while (i < nText) {
    if (z[i] < 0x80) {
      if (isAsciiAlnum(z[i])) {
        bContent = 1;
        bAfterSeparator = 0;
      } else {
        bAfterSeparator = 1;
      }
      i++;
      continue;
    }
    n = decode(&z[i], nText - i, &c);
    int cls = classOf(c);
    if ((cls & CLASS_T) && bAfterSeparator && canonical(&z[i], n, c) &&
        separatorAt(&z[i + n], nText - i - n)) {
      if (bContent) {
        shifted.iBase = iSeg;
        rc = t->pParent->x.xTokenize(t->pReal, &shifted, flags, pText + iSeg, i - iSeg,
                                     pLocale, nLocale, shiftedToken);
        if (rc != SQLITE_OK) return rc;
      }
      rc = xToken(pCtx, 0, pText + i, n, i, i + n);
      if (rc != SQLITE_OK) return rc;
      i += n;
      iSeg = i;
      bContent = 0;
      bAfterSeparator = 0;
    } else {
      if (cls & CLASS_S) {
        bAfterSeparator = 1;
      } else {
        bContent = 1;
        bAfterSeparator = 0;
      }
      i += n;
    }
  }
  if (bContent) {
    shifted.iBase = iSeg;
    return t->pParent->x.xTokenize(t->pReal, &shifted, flags, pText + iSeg, nText - iSeg,
                                   pLocale, nLocale, shiftedToken);
  }
  return SQLITE_OK;
}

static int cjkTokenize(Fts5Tokenizer *pTok, void *pCtx, int flags, const char *pText, int nText,
                       const char *pLocale, int nLocale,
                       int (*xToken)(void *, int, const char *, int, int, int)) {
  Tokenizer *t = (Tokenizer *)pTok;
  if (!t->bFast) {
    return t->pParent->x.xTokenize(t->pReal, pCtx, flags, pText, nText, pLocale, nLocale, xToken);
  }
  return fastTokenize(t, pCtx, flags, pText, nText, pLocale, nLocale, xToken);
}

static int cjkCreate(void *pUserData, const char **azArg, int nArg, Fts5Tokenizer **ppOut) {
  Parent *pParent = (Parent *)pUserData;
  Tokenizer *t = sqlite3_malloc(sizeof(Tokenizer));
  int i, rc;
  if (t == 0) return SQLITE_NOMEM;
  memset(t, 0, sizeof(*t));
  t->pParent = pParent;
  rc = pParent->x.xCreate(pParent->pUserData, azArg, nArg, &t->pReal);
  if (rc != SQLITE_OK) {
    sqlite3_free(t);
    return rc;
  }
  t->bFast = probed;
  for (i = 0; i < nArg; i += 2) {
    if (sqlite3_stricmp(azArg[i], "remove_diacritics") != 0) t->bFast = 0;
  }
  *ppOut = (Fts5Tokenizer *)t;
  return SQLITE_OK;
}

static void cjkDelete(Fts5Tokenizer *pTok) {
  Tokenizer *t = (Tokenizer *)pTok;
  t->pParent->x.xDelete(t->pReal);
  sqlite3_free(t);
}

/* ------------------------------------------------------------------ index text */

/* fts_text.index_text, for the preparing workers (through ctypes): the same text out, byte
** for byte (tests/daemon/test_cjk_tokens.py compares the two on every character). */

static const unsigned int aCjk[][2] = {
    /* domain/scripts.CJK_RANGES */
    {0x1100, 0x11FF}, {0x2E80, 0x2FDF}, {0x3040, 0x30FF}, {0x3100, 0x312F},
    {0x3130, 0x318F}, {0x31F0, 0x31FF}, {0x3400, 0x4DBF}, {0x4E00, 0x9FFF},
    {0xA960, 0xA97F}, {0xAC00, 0xD7AF}, {0xF900, 0xFAFF}, {0xFF66, 0xFF9F},
    {0x20000, 0x3134F},
};

static const unsigned int aSplitAnyway[] = {
    /* fts_text.SPLIT_ANYWAY past ASCII, sorted */
    0x2014, 0x2018, 0x2019, 0x201C, 0x201D, 0x2026, 0x3000, 0x3001, 0x3002, 0x3008, 0x3009,
    0x300A, 0x300B, 0x300C, 0x300D, 0x300E, 0x300F, 0x3010, 0x3011, 0x3014, 0x3015, 0x30FB,
    0xFF01, 0xFF08, 0xFF09, 0xFF0C, 0xFF0E, 0xFF1A, 0xFF1B, 0xFF1F, 0xFF5E,
};

#define SEPARATOR 0x1F
#define ZWSP 0x200B
#define RUN_PIECE 1024 /* index_text's runs are cut in pieces of this many characters */

static int isCjk(unsigned int c) {
  size_t i;
  if (c < 0x1100) return 0;
  for (i = 0; i < sizeof(aCjk) / sizeof(aCjk[0]); i++) {
    if (c < aCjk[i][0]) return 0;
    if (c <= aCjk[i][1]) return 1;
  }
  return 0;
}

static int splitsAnyway(unsigned int c) {
  size_t lo = 0, hi = sizeof(aSplitAnyway) / sizeof(aSplitAnyway[0]);
  if (c < 0x80) return c != 0 && strchr(" \t\n\r\x1f,.;:!?()[]{}<>\"'-/", (int)c) != 0;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (aSplitAnyway[mid] == c) return 1;
    if (aSplitAnyway[mid] < c) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

/* `in` is UTF-8 (a Python str encoded); `out` holds 2 * n + 16 bytes. Answers the length
** written. */
#ifdef _WIN32
__declspec(dllexport)
#endif
size_t coffer_index_text(const unsigned char *in, size_t n, unsigned char *out) {
  enum { START, CJK, SPLIT, OTHER } prev = START;
  size_t i = 0, o = 0, run = 0, len;
  unsigned int c;
  while (i < n) {
    if (in[i] < 0x80) {
      c = in[i];
      len = 1;
    } else {
      len = in[i] >= 0xF0 ? 4 : in[i] >= 0xE0 ? 3 : 2;
      if (i + len > n) len = n - i;
      c = in[i] & (0x3F >> (len - 1));
      for (size_t k = 1; k < len; k++) c = (c << 6) | (in[i + k] & 0x3F);
    }
    if (isCjk(c)) {
      if (prev == OTHER || prev == CJK) out[o++] = SEPARATOR;
      if (prev == CJK && run % RUN_PIECE == 0) out[o++] = SEPARATOR; /* between two pieces */
      memcpy(&out[o], &in[i], len);
      o += len;
      prev = CJK;
      run++;
    } else {
      int isSplit;
      if (c == ZWSP) c = SEPARATOR;
      isSplit = splitsAnyway(c);
      if (prev == CJK && !isSplit) out[o++] = SEPARATOR;
      if (c == SEPARATOR) out[o++] = SEPARATOR;
      else {
        memcpy(&out[o], &in[i], len);
        o += len;
      }
      prev = isSplit ? SPLIT : OTHER;
      run = 0;
    }
    i += len;
  }
  return o;
}

/* ------------------------------------------------------------------ loading */

static fts5_api *fts5Api(sqlite3 *db) {
  fts5_api *pApi = 0;
  sqlite3_stmt *pStmt = 0;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &pStmt, 0) == SQLITE_OK) {
    sqlite3_bind_pointer(pStmt, 1, (void *)&pApi, "fts5_api_ptr", 0);
    sqlite3_step(pStmt);
  }
  sqlite3_finalize(pStmt);
  return pApi;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_cjktokens_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  static fts5_tokenizer_v2 ours = {2, cjkCreate, cjkDelete, cjkTokenize};
  fts5_api *fts5;
  fts5_tokenizer_v2 *pFound = 0;
  void *pFoundData = 0;
  Parent *pParent;
  int rc;
  SQLITE_EXTENSION_INIT2(pApi);
  fts5 = fts5Api(db);
  if (fts5 == 0 || fts5->iVersion < 3) {
    *pzErrMsg = sqlite3_mprintf("cjk_tokens: FTS5 (API version 3) is not in this SQLite");
    return SQLITE_ERROR;
  }
  rc = fts5->xFindTokenizer_v2(fts5, "unicode61", &pFoundData, &pFound);
  if (rc != SQLITE_OK) return rc;
  if (pFound->xCreate == cjkCreate) return SQLITE_OK; /* loaded on this connection already */
  pParent = sqlite3_malloc(sizeof(Parent));
  if (pParent == 0) return SQLITE_NOMEM;
  pParent->pUserData = pFoundData;
  pParent->x = *pFound;
  if (!probed) {
    sqlite3_mutex *mutex = sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_APP1);
    sqlite3_mutex_enter(mutex);
    if (!probed && probeAll(pParent) == SQLITE_OK) probed = 1;
    sqlite3_mutex_leave(mutex);
  }
  return fts5->xCreateTokenizer_v2(fts5, "unicode61", pParent, &ours, sqlite3_free);
}
