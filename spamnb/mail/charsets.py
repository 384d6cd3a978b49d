"""Declared charset name -> codec name, bounded in memory and time whatever mail declares.

Mail declares charsets by name, and an attacker chooses the names.  Handing every
name to ``codecs.lookup`` leaks: the standard library's ``encodings`` search
function caches every name it is asked for, misses included, for the life of the
process, and a miss costs an import attempt (measured before this module: RSS
24 -> 362 MiB over 20,000 messages with random ``=?x...?q?a?=`` words, ~9 ms
each).  So a name reaches ``codecs.lookup`` only in its canonical form, and only
when that form is one of the standard library's encodings (its module names and
aliases, a fixed set): what the codec registry caches is bounded by that set.
Names are also kept in this module's own cache, which stops growing at
``MAX_CACHE`` entries.  Codecs registered by other packages are not used.
"""

import codecs

__all__ = ["codec", "is_text_codec", "MAX_CACHE"]

MAX_CACHE = 1000
MAX_NAME = 40

# Mail names that mean "no declared charset", or that are better read as another.
_ALIASES = {
    "default_charset": None, "default": None, "unknown-8bit": None, "x-unknown": None,
    "us-ascii": None, "ascii": None, "ansi_x3.4-1968": None, "x-user-defined": None,
    "ks_c_5601-1987": "euc_kr", "ks_c_5601": "euc_kr", "gb2312": "gb18030", "gbk": "gb18030",
    "x-gbk": "gb18030", "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252",
    "iso-8859-8-i": "iso-8859-8", "x-mac-roman": "mac_roman", "utf8": "utf-8",
}
# Codecs a message may not choose: they are not charsets, and some decode in
# quadratic time (punycode) or to lone surrogates (the escape codecs).
_REFUSED = frozenset(("punycode", "idna", "unicode_escape", "raw_unicode_escape", "mbcs", "oem", "undefined"))

codec_cache: dict = {}           # declared name -> codec name or None (read by spamnb.mail._mail too)
_known = None               # the standard library's encoding module names and aliases


def known_names():
    global _known
    if _known is None:
        import encodings
        import encodings.aliases
        from posix import listdir   # os.listdir itself, without os (posixpath, _collections_abc...)

        names = set(encodings.aliases.aliases.values())
        for folder in encodings.__path__:
            for entry in listdir(folder):
                stem, dot, suffix = entry.partition(".")
                if dot and suffix in ("py", "pyc") and stem.isidentifier() and not stem.startswith("_"):
                    names.add(stem)
        _known = (encodings.aliases.aliases, frozenset(names))
    return _known


def _canonical(name):
    """The standard library's module name for a charset name, or None.  The
    normalisation is ``encodings.normalize_encoding``'s (runs of other
    characters become one "_"), on ASCII names of at most MAX_NAME characters."""
    if not name or len(name) > MAX_NAME or not name.isascii():
        return None
    chars, punct = [], False
    for c in name:
        if c.isalnum() or c == ".":
            if punct and chars:
                chars.append("_")
            chars.append(c)
            punct = False
        else:
            punct = True
    norm = "".join(chars)
    aliases, modules = known_names()
    canonical = aliases.get(norm) or aliases.get(norm.replace(".", "_")) or norm
    return canonical if canonical in modules else None


def codec(charset):
    """The codec name for a declared charset (lower case), or None: unknown,
    refused, or "use the fallback"."""
    try:
        return codec_cache[charset]
    except KeyError:
        pass
    name = _ALIASES.get(charset, charset)
    if name is not None:
        canonical = _canonical(name)
        name = None
        if canonical is not None and canonical not in _REFUSED:
            try:
                info = codecs.lookup(canonical)
            except (LookupError, ValueError, TypeError):
                info = None
            if info is not None and getattr(info, "_is_text_encoding", True) \
                    and info.name.replace("-", "_") not in _REFUSED:
                name = info.name
    if len(codec_cache) < MAX_CACHE:
        codec_cache[charset] = name
    return name


def is_text_codec(name):
    """True when ``name`` is a charset the parser decodes with (used to validate settings)."""
    return codec(name.strip().lower()) is not None
