"""The milter's policy: what a message gets before and after it is scored
(spamnb.server.milter asks; this module decides, and reads nothing from
the network).

Before scoring (:meth:`Policy.before`), in this order:

1. ``--milter-skip-authenticated``: a message whose MAIL command came with
   the ``{auth_authen}`` macro (a SASL-authenticated submission), and
   ``--trusted-networks NETS``: a client address inside one of NETS; both
   get ``--milter-trusted-action``: ``accept`` (passed untouched, not
   scored) or ``check`` (scored and logged, passed untouched: no field, no
   refusal, no deferral);
2. the block list (``--milter-blocklist FILE``): a sender address, a
   sender domain or a client network on it is refused (``550 5.7.1``,
   answered by the MTA during the SMTP session: spamnb never bounces);
3. the allow list (``--milter-allowlist FILE``): delivered with
   ``X-Spam-Status: No, score=0.0 required=R allowlisted=KIND``, not
   scored.

After scoring (:meth:`DomainPolicy.action`): spam at or above the reject
score is refused, spam below it gets the spam action, unsure mail the
unsure action (``tempfail``: at most once per triplet, :class:`Triplets`).

The list files (:func:`read_list`): one entry a line, ``#`` starts a
comment; ``user@example.org`` (a sender address), ``@example.org`` or
``example.org`` (a sender domain and its subdomains), ``192.0.2.0/24`` or
``2001:db8::1`` (a client network or address).  At most
:data:`MAX_LIST_BYTES` bytes and :data:`MAX_LIST_ENTRIES` entries a file,
:data:`MAX_LINE` characters a line; a bad line is a one-line
:class:`~spamnb.errors.SettingsError` naming the file and its line number.

The per-recipient-domain policy (:func:`read_domains`): a TOML file (it
may be the settings.toml itself: the commands ignore its ``[domain]``
tables) of ``[domain."example.org"]`` tables, each with any of
``spam_action``, ``reject_score``, ``unsure_action`` and ``model``; a
message for several domains gets the policy of its first recipient's domain.
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections import OrderedDict

from spamnb.errors import SettingsError
from spamnb.settings import MILTER_SPAM_ACTIONS as SPAM_ACTIONS
from spamnb.settings import MILTER_UNSURE_ACTIONS as UNSURE_ACTIONS
from spamnb.settings import in_networks

MAX_LIST_BYTES = 4 * 1024 * 1024    # bytes of one list file
MAX_LIST_ENTRIES = 100_000          # entries of one list file
MAX_LINE = 512                      # characters of one line of it
MAX_DOMAINS = 1000                  # tables of the domain policy file
TRIPLET_ENTRIES = 20_000            # triplets remembered (per worker process), least recent out first
TRIPLET_WINDOW = 4 * 3600.0         # seconds a deferred triplet is accepted on its retry
_DOMAIN_KEYS = {"spam_action": str, "reject_score": (int, float), "unsure_action": str, "model": str}


def address_of(raw):
    """A sender or recipient as the envelope gives it (bytes or str, maybe in
    ``<>``): the address, lower case ("" for the null sender)."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw[:1024]).decode("utf-8", "replace")
    return raw[:1024].strip().strip("<>").strip().lower()


def domain_of(address):
    return address.rpartition("@")[2] if "@" in address else ""


class AddressList:
    """One list file read: sender addresses, sender domains, client networks."""

    __slots__ = ("path", "senders", "domains", "networks")

    def __init__(self, path=None):
        self.path = path
        self.senders, self.domains, self.networks = set(), set(), []

    def __len__(self):
        return len(self.senders) + len(self.domains) + len(self.networks)

    def match(self, sender, client):
        """Why the envelope ``sender`` (an address) or ``client`` (its address)
        is on the list: ``sender``, ``sender_domain``, ``client_network``; or None."""
        if sender and sender in self.senders:
            return "sender"
        domain = domain_of(sender)
        while domain:
            if domain in self.domains:
                return "sender_domain"
            domain = domain.partition(".")[2]
        if in_networks(client, self.networks):
            return "client_network"
        return None


def _read_bounded(path, option):
    """The bytes of the file at ``path``, at most :data:`MAX_LIST_BYTES`; SettingsError otherwise."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_LIST_BYTES + 1)
    except OSError as exc:
        raise SettingsError(f"{option} {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_LIST_BYTES:
        raise SettingsError(f"{option} {path}: larger than {MAX_LIST_BYTES} bytes")
    return raw


def read_list(path, option="list"):
    """The :class:`AddressList` of the file at ``path``; SettingsError (one
    line: the file, the line number, what is wrong) when it cannot be used."""
    raw = _read_bounded(path, option)
    out = AddressList(path)
    for number, line in enumerate(raw.split(b"\n"), 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise SettingsError(f"{option} {path}:{number}: not UTF-8") from None
        if len(text) > MAX_LINE:
            raise SettingsError(f"{option} {path}:{number}: a line longer than {MAX_LINE} characters")
        entry = text.split("#", 1)[0].strip().lower()
        if not entry:
            continue
        if len(out) >= MAX_LIST_ENTRIES:
            raise SettingsError(f"{option} {path}:{number}: more than {MAX_LIST_ENTRIES} entries")
        problem = _add_entry(out, entry)
        if problem:
            raise SettingsError(f"{option} {path}:{number}: {problem}: {entry[:80]!r}")
    return out


def _add_entry(out, entry):
    if any(c.isspace() for c in entry) or not entry.isprintable():
        return "one entry a line (an address, @domain, domain or network)"
    if "@" in entry:
        local, _, domain = entry.rpartition("@")
        if not _is_domain(domain) or "@" in local:
            return "not an address or @domain"
        if local:
            out.senders.add(entry)
        else:
            out.domains.add(domain)
        return None
    if ":" in entry or "/" in entry or entry.replace(".", "").isdigit():
        try:
            out.networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            return "not an address or network"
        return None
    if not _is_domain(entry):
        return "not a domain"
    out.domains.add(entry)
    return None


def _is_domain(text):
    labels = text.split(".")
    return 0 < len(text) <= 253 and all(0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
                                         for label in labels)


def allowlisted_fields(why, required):
    """The fields of allow-listed mail (not scored): ``X-Spam-Status: No,
    score=0.0 required=R tests=ALLOWLISTED allowlisted=WHY`` and its
    companions, as (name, value) bytes pairs."""
    from spamnb.report.headers import checker_version

    return [(b"X-Spam-Status", f"No, score=0.0 required={required:.1f} tests=ALLOWLISTED allowlisted={why}".encode()),
            (b"X-Spam-Score", b"0.0"), (b"X-Spam-Level", b""),
            (b"X-Spam-Checker-Version", checker_version().encode())]


class DomainPolicy:
    """What a recipient domain's mail gets: ``spam_action``,
    ``reject_score`` (None: no separate threshold), ``unsure_action``,
    ``model`` (None: the site model)."""

    __slots__ = ("spam_action", "reject_score", "unsure_action", "model")

    def __init__(self, spam_action="tag", reject_score=None, unsure_action="accept", model=None):
        self.spam_action, self.reject_score = spam_action, reject_score
        self.unsure_action, self.model = unsure_action, model

    def action(self, label, score):
        """``reject``, ``quarantine``, ``tag`` (the fields; the subject tagged
        for spam), ``unsure-tag`` (the fields and the subject tag),
        ``tempfail`` (for :class:`Triplets` to bound) or ``accept`` (the fields)."""
        if label == "spam":
            if self.reject_score is None:
                return self.spam_action
            if score >= self.reject_score:
                return "reject"
            return "tag" if self.spam_action == "reject" else self.spam_action
        if label == "unsure":
            return {"accept": "tag", "tag": "unsure-tag", "tempfail": "tempfail"}[self.unsure_action]
        return "tag"


def _domain_policy(values, base, where):
    policy = DomainPolicy(base.spam_action, base.reject_score, base.unsure_action, base.model)
    for key, value in values.items():
        kind = _DOMAIN_KEYS.get(key)
        if kind is None:
            raise SettingsError(f"{where}: unknown key {key!r} (known: {', '.join(_DOMAIN_KEYS)})")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SettingsError(f"{where}: {key} must be a {'number' if key == 'reject_score' else 'string'}")
        setattr(policy, key, float(value) if key == "reject_score" else value)
    if policy.spam_action not in SPAM_ACTIONS:
        raise SettingsError(f"{where}: spam_action must be tag, reject or quarantine")
    if policy.unsure_action not in UNSURE_ACTIONS:
        raise SettingsError(f"{where}: unsure_action must be accept, tag or tempfail")
    return policy


def read_domains(path, base, required):
    """{domain: DomainPolicy} of the ``[domain."NAME"]`` tables of the TOML
    file at ``path``, each key not given taken from ``base`` (the server's
    own options); SettingsError when the file or a table cannot be used
    (a reject score below ``required``, the spam cutoff's score, too)."""
    import tomllib

    raw = _read_bounded(path, "--milter-domains")
    try:
        tables = tomllib.loads(raw.decode("utf-8")).get("domain", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"--milter-domains {path}: not valid TOML: {exc}") from None
    if not isinstance(tables, dict) or len(tables) > MAX_DOMAINS:
        raise SettingsError(f"--milter-domains {path}: [domain] must hold at most {MAX_DOMAINS} tables")
    out = {}
    for name, values in tables.items():
        where = f"--milter-domains {path}: [domain.{name!r}]"
        if not isinstance(values, dict) or not _is_domain(name.lower()):
            raise SettingsError(f"{where}: a table named by a domain")
        policy = _domain_policy(values, base, where)
        if policy.reject_score is not None and policy.reject_score < required:
            raise SettingsError(f"{where}: reject_score {policy.reject_score:g} is below the spam cutoff's "
                                f"score {required:g} (--required-score)")
        out[name.lower()] = policy
    return out


class Policy:
    """The policy in effect (made from the server's settings at start and at
    each SIGHUP; :meth:`load` raises SettingsError)."""

    def __init__(self, skip_authenticated=False, trusted=(), trusted_action="accept", allow=None, block=None,
                 base=None, domains=None):
        self.skip_authenticated = skip_authenticated
        self.trusted = list(trusted)
        self.trusted_action = trusted_action
        self.allow = allow or AddressList()
        self.block = block or AddressList()
        self.base = base or DomainPolicy()
        self.domains = domains or {}

    @staticmethod
    def load_base(settings):
        """The server's own options as a :class:`DomainPolicy`."""
        return DomainPolicy(settings.milter_spam_action, settings.milter_reject_score, settings.milter_unsure_action)

    @classmethod
    def load(cls, settings):
        base = cls.load_base(settings)
        return cls(settings.milter_skip_authenticated, settings.trusted_networks, settings.milter_trusted_action,
                   read_list(settings.milter_allowlist, "--milter-allowlist") if settings.milter_allowlist else None,
                   read_list(settings.milter_blocklist, "--milter-blocklist") if settings.milter_blocklist else None,
                   base,
                   read_domains(settings.milter_domains, base, settings.required_score)
                   if settings.milter_domains else None)

    def before(self, sender, client, authenticated):
        """(what, why) before scoring: ``accept`` or ``check`` (trusted),
        ``block``, ``allow``; None when the message is scored as usual."""
        if authenticated and self.skip_authenticated:
            return self.trusted_action, "authenticated"
        if in_networks(client, self.trusted):
            return self.trusted_action, "trusted_network"
        why = self.block.match(sender, client)
        if why:
            return "block", why
        why = self.allow.match(sender, client)
        if why:
            return "allow", why
        return None

    def for_recipient(self, recipient):
        """The :class:`DomainPolicy` of a recipient address (its domain's, else the server's)."""
        if self.domains:
            domain = domain_of(recipient)
            return self.domains.get(domain, self.base)
        return self.base


class Triplets:
    """The (client address, sender, first recipient) triplets deferred
    lately: at most ``size`` of them (least recently used out first; each
    a 16-byte digest, whatever the addresses' lengths), each for
    ``window`` seconds.  :meth:`defer` says whether to defer a message
    now: the first time in a window yes, on a retry within it no."""

    def __init__(self, size=TRIPLET_ENTRIES, window=TRIPLET_WINDOW, clock=time.monotonic):
        self.size, self.window, self.clock = size, window, clock
        self.seen = OrderedDict()

    def __len__(self):
        return len(self.seen)

    def defer(self, client, sender, recipient):
        key = hashlib.blake2b("\x00".join((client or "", sender or "", recipient or "")).encode("utf-8",
                                                                                                  "replace"),
                              digest_size=16).digest()
        now = self.clock()
        when = self.seen.get(key)
        if when is not None and now - when < self.window:
            self.seen.move_to_end(key)
            return False
        self.seen[key] = now
        self.seen.move_to_end(key)
        while len(self.seen) > self.size:
            self.seen.popitem(last=False)
        return True

