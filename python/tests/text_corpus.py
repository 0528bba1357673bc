"""A multilingual text corpus built from what any machine running the tests has offline: the Python standard
library's sources, Debian's license texts and translation catalogs (/usr/share/locale/*/LC_MESSAGES/*.mo: real
Russian, Japanese, Arabic, Hindi ... sentences), topped up with generated text that mixes scripts, emoji, digits of
several numeral systems, whitespace runs and control characters. Deterministic for a given machine.

Generated characters come from blocks complete since Unicode 10: the regex engines compared (PCRE2 here,
Oniguruma in `tokenizers`) ship different Unicode versions, and a character one of them does not know yet is
classified differently (unassigned instead of a symbol)."""
import gettext
import glob
import os
import random

LANGUAGES = ["ru", "uk", "ja", "zh_CN", "zh_TW", "ko", "ar", "he", "fa", "hi", "bn", "ta", "th", "vi", "el", "tr",
             "pl", "cs", "de", "fr", "es", "pt_BR", "it", "ka", "hy", "am"]

WORDS = ["hello", "world", "The", "tokenizer", "don't", "WE'LL", "it's", "naïve", "café", "Straße", "Привет", "мир",
         "Ελληνικά", "日本語", "東京都", "中文", "漢字", "한국어", "مرحبا", "بالعالم", "שלום", "हिन्दी", "தமிழ்", "ไทย",
         "Tiếng Việt", "ქართული", "Հայերեն", "አማርኛ", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "❤️", "∑∫√", "x²", "½", "①②",
         "Ⅻ", "ὰὼ", "\u212a", "ʔʕ", "Ꞑ", "ꭰ", "١٢٣", "۱۲۳", "१२३", "3.14159", "1234567890", "0x1F", "e\u0301", "a\u0323\u0302", "\u200bzw",
         "‹quote›", "«ёлка»", "„Zitat“", "—", "…", "#include", "std::vector<int>", "def f(x):", "=>", "!==", "://",
         "<think>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", "▁", "Ġ", "<0x41>"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "\u2028", "\t\t ", "    ", "\x0b", "\x0c"]


def _generated(rng, n_chars):
    out, size = [], 0
    while size < n_chars:
        k = rng.randint(1, 12)
        parts = []
        for _ in range(k):
            r = rng.random()
            if r < 0.6:
                parts.append(rng.choice(WORDS))
            elif r < 0.75:
                parts.append("".join(chr(rng.randint(lo, hi)) for lo, hi in
                                     [rng.choice([(0x4E00, 0x9FA5), (0x0400, 0x04FF), (0x0600, 0x061C), (0x3040, 0x30FF),
                                                  (0xAC00, 0xD7A3), (0x0900, 0x097F), (0x1F300, 0x1F64F),
                                                  (0x0021, 0x007E), (0x00A1, 0x024F), (0x0370, 0x03FF)])]
                                     * rng.randint(1, 8)))
            elif r < 0.85:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            else:
                parts.append(rng.choice(SPACES) * rng.randint(1, 3))
        s = "".join(p + rng.choice(SPACES[:3] + [""]) for p in parts)
        out.append(s)
        size += len(s)
    return out


def _catalog_texts(limit_chars):
    """msgstr strings of translation catalogs, a few files per language, in a stable order."""
    out, size = [], 0
    per_language = limit_chars // len(LANGUAGES)
    for lang in LANGUAGES:
        taken = 0
        for path in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
            try:
                with open(path, "rb") as f:
                    catalog = gettext.GNUTranslations(f)
            except Exception:  # a catalog this Python cannot read is simply not used
                continue
            texts = [v for v in catalog._catalog.values() if isinstance(v, str) and v.strip()]
            block = "\n".join(texts)
            if not block:
                continue
            block = block[: per_language - taken]
            out.append(block)
            taken += len(block)
            if taken >= per_language:
                break
        size += taken
    return out


def _file_texts(paths, limit_chars):
    out, size = [], 0
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                t = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        out.append(t[: limit_chars - size])
        size += len(out[-1])
        if size >= limit_chars:
            break
    return out


def documents(total_chars=2_000_000, chunk=4000, seed=0):
    """The corpus cut into documents of at most `chunk` characters (cuts land anywhere, mid-word included)."""
    rng = random.Random(seed)
    stdlib = os.path.dirname(os.__file__)
    texts = _file_texts(sorted(glob.glob(os.path.join(stdlib, "*.py"))), total_chars // 4)
    texts += _file_texts(sorted(glob.glob("/usr/share/common-licenses/*")), total_chars // 8)
    texts += _catalog_texts(total_chars // 3)
    have = sum(len(t) for t in texts)
    texts += _generated(rng, max(total_chars - have, total_chars // 5))
    docs = []
    for t in texts:
        i = 0
        while i < len(t):
            n = rng.randint(1, chunk)
            docs.append(t[i:i + n])
            i += n
    return docs
