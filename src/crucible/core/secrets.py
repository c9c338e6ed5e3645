"""Values that may be secrets, named in messages without being shown.

A key put where a config wants the NAME of the environment variable holding it (``api_key_env:
hf_…``) or inside a URL would be repeated by every message that quotes the value, and those go
to job logs, Snakemake's log and ``.snakemake/log``. :func:`looks_like_key` tells such a value
by its form, :func:`masked` shows at most a known prefix and the length, and :func:`scrub` masks
every key-like word and every URL's userinfo and query string in a message that quotes config.
"""

from __future__ import annotations

import re

# Prefixes of the tokens that hosted services hand out (Hugging Face, OpenAI and Anthropic,
# Stripe-like, GitHub, GitLab, Slack, AWS, Google): a value starting so is a key, not a name.
KEY_PREFIXES = (
    "hf_", "sk-", "sk_", "pk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "xoxb-", "xoxp-", "xapp-", "AKIA", "ASIA", "AIza", "eyJ",
)  # fmt: skip
# Below this many characters after its prefix a value is not taken for a key (``sk_x``).
MIN_KEY_BODY = 8
# A run of letters and digits this long that mixes both is random enough to be a key: environment
# variable names are words joined by underscores (OPENAI_API_KEY_2), never one long random word.
MIN_RANDOM_RUN = 20
_RUNS = re.compile(r"[A-Za-z0-9]+")
_DIGEST = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")  # a git or SHA-256 digest: printed on purpose
_WORD = re.compile(r"[A-Za-z0-9_\-.+/=~]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def _known_prefix(value: str) -> str | None:
    return next((p for p in KEY_PREFIXES if value.startswith(p) and len(value) - len(p) >= MIN_KEY_BODY), None)


def looks_like_key(value: str) -> bool:
    """Whether ``value`` has the form of an access token rather than of a name."""
    if _known_prefix(value):
        return True
    for run in _RUNS.findall(value):
        if len(run) < MIN_RANDOM_RUN or _DIGEST.fullmatch(run):
            continue
        has_digit = any(c.isdigit() for c in run)
        has_letter = any(c.isalpha() for c in run)
        mixed_case = any(c.islower() for c in run) and any(c.isupper() for c in run)
        if (has_digit and has_letter) or mixed_case:
            return True
    return False


def masked(value: str) -> str:
    """``value`` shown as at most its known key prefix and its length: ``hf_… (37 characters)``."""
    prefix = _known_prefix(value) or ""
    return f"{prefix}… ({len(value)} characters)"


def public_url(url: str) -> str:
    """``url`` without its ``user:password@`` part, and with any query string or fragment
    replaced by ``***``."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is no number: nothing of the address is needed to say that
        return "(an address)"
    netloc = ("***@" if "@" in parts.netloc else "") + host + port
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", "***" if parts.fragment else ""))


def scrub(text: str) -> str:
    """``text`` with every URL's ``user:password@`` and query string or fragment replaced by
    ``***`` and every other key-like word masked: for messages that quote config values."""
    text = _URL.sub(lambda m: public_url(m.group(0)), text)
    return _WORD.sub(lambda m: masked(m.group(0)) if looks_like_key(m.group(0)) else m.group(0), text)


# Below this many characters a base64 fragment of a key would match ordinary text by chance.
MIN_BASE64_CORE = 8
_B64 = "A-Za-z0-9+/_-"


def _base64_cores(key: bytes) -> set[str]:
    """The base64 characters that depend on ``key`` alone, for each of the three offsets at which
    it can start inside an encoded string (``user:key`` and ``:key`` of HTTP Basic auth, the key
    alone, the key followed by anything), in the standard and the URL-safe alphabet."""
    import base64

    cores = set()
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + key).decode().rstrip("=")
        first = -(-pad * 8 // 6)  # the first character whose bits all come from the key
        last = (pad + len(key)) * 8 // 6  # one past the last such character
        core = encoded[first:last]
        if len(core) >= MIN_BASE64_CORE:
            cores.update({core, core.replace("+", "-").replace("/", "_")})
    return cores


def key_forms(key: str) -> list[str]:
    """How a server may echo ``key`` as text: as it is (``Bearer <key>`` included), URL-encoded,
    JSON-escaped; longest first, so that a form is replaced before a part of it."""
    import json
    from urllib.parse import quote, quote_plus

    forms = {
        key,
        quote(key, safe=""),
        quote_plus(key),
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
    }
    forms |= {f.replace("/", "\\/") for f in list(forms)}
    return sorted((f for f in forms if f), key=len, reverse=True)


def scrub_key(text: str, key: str | None) -> str:
    """``text`` with ``key`` replaced by ``***`` wherever it appears as it is, URL-encoded,
    JSON-escaped, or base64-encoded (alone or inside ``user:key``, as in an echoed
    ``Authorization: Basic`` header; the whole base64 word is replaced)."""
    if not key or not text:
        return text
    for form in key_forms(key):
        text = text.replace(form, "***")
    for core in sorted(_base64_cores(key.encode("utf-8")), key=len, reverse=True):
        if core in text:
            text = re.sub(f"[{_B64}]*{re.escape(core)}[{_B64}]*=*", "***", text)
    return text
