"""nltk's WordNet offline: provision it from Debian's ``wordnet-base`` when nltk's own data is missing.

Debian ships the WordNet 3.0 database in ``/usr/share/wordnet`` but not the ``lexnames``
file nltk's reader opens first, nor ``index.sense`` (packaged separately as
``wordnet-sense-index``), which nltk reads when it builds its 3.0→3.0 synset map.
``lexnames`` is the fixed list of the 45 lexicographer files (``lexnames(5WN)``);
``index.sense`` is generated from the data/index/cntlist files. The multilingual OMW
data (``omw-2.0``) is only loaded for non-English lookups, which METEOR never makes.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

DEBIAN_WORDNET = Path("/usr/share/wordnet")
FIX = "install Debian's WordNet data: apt-get install -y --no-install-recommends wordnet-base"
_DB_FILES = ("adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev",
             *(f"{k}.{p}" for k in ("data", "index") for p in ("adj", "adv", "noun", "verb")))

# lexnames(5WN): file number = position; syntactic category 1 noun, 2 verb, 3 adj, 4 adv.
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


class WordNetUnavailable(RuntimeError):
    """nltk's WordNet cannot be loaded nor provisioned."""


def lexnames_text() -> str:
    """The ``lexnames`` file: ``NN<TAB>name<TAB>category`` per line, numbered 00..44."""
    return "".join(f"{i:02d}\t{n}\t{_CATEGORY[n.split('.')[0]]}\n" for i, n in enumerate(LEXNAMES))


def default_data_dir() -> Path:
    """``$EVALCORE_NLTK_DATA``, else ``~/nltk_data`` (on nltk's default search path)."""
    env = os.environ.get("EVALCORE_NLTK_DATA")
    return Path(env) if env else Path.home() / "nltk_data"


def _index_sense_lines(wn_dir: Path) -> list[str]:
    """Lines of ``index.sense`` (``key offset sense_number tag_cnt``), sorted, from a WordNet dir."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    senses: dict[tuple[str, str], list[int]] = {}  # (lemma, pos letter) → synset offsets in sense order
    for pos, letter in (("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r")):
        with open(wn_dir / f"index.{pos}", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(" "):
                    continue
                f = line.split()
                n_syn, n_ptr = int(f[2]), int(f[3])
                senses[(f[0], letter)] = [int(o) for o in f[6 + n_ptr:6 + n_ptr + n_syn]]
    counts: dict[str, int] = {}
    with open(wn_dir / "cntlist.rev", encoding="utf-8") as fh:
        for line in fh:
            key, _, cnt = line.split()
            counts[key] = int(cnt)
    # nltk opens only corpora under a root on nltk.data.path, and its reader re-opens
    # "corpora/wordnet" by name, so ``wn_dir`` must be ``<root>/corpora/wordnet``.
    root = str(wn_dir.parent.parent)
    added = root not in nltk.data.path
    if added:
        nltk.data.path.insert(0, root)
    try:
        with warnings.catch_warnings():  # "multilingual functions are not available": expected
            warnings.simplefilter("ignore")
            reader = WordNetCorpusReader(str(wn_dir), None)  # needs only an (empty) index.sense here
        return _sense_lines(reader, senses, counts)
    finally:
        if added:
            nltk.data.path.remove(root)


def _sense_lines(reader: Any, senses: dict[tuple[str, str], list[int]], counts: dict[str, int]) -> list[str]:
    lines = []
    for synset in reader.all_synsets():
        letter = "a" if synset.pos() == "s" else synset.pos()
        for lemma in synset.lemmas():
            key = lemma.key()
            offsets = senses.get((lemma.name().lower(), letter), [])
            num = offsets.index(synset.offset()) + 1 if synset.offset() in offsets else 0
            lines.append(f"{key} {synset.offset():08d} {num} {counts.get(key, 0)}\n")
    return sorted(set(lines))


def provision(data_dir: Path | str | None = None, source: Path | str = DEBIAN_WORDNET) -> Path:
    """Build ``<data_dir>/corpora/wordnet`` from Debian's WordNet files; returns ``data_dir``.

    Idempotent: an existing ``corpora/wordnet`` with a ``lexnames`` file is kept.
    """
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    source = Path(source)
    target = data_dir / "corpora" / "wordnet"
    if (target / "lexnames").is_file() and (target / "index.sense").is_file():
        return data_dir
    missing = [f for f in _DB_FILES if not (source / f).is_file()]
    if missing:
        raise WordNetUnavailable(f"WordNet 3.0 files missing in {source} ({missing[:3]}...); {FIX}")
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    tmp = build / "corpora" / "wordnet"
    tmp.mkdir(parents=True)
    try:
        for f in _DB_FILES:  # copies, not symlinks: nltk refuses paths escaping the corpus root
            shutil.copyfile(source / f, tmp / f)
        (tmp / "lexnames").write_text(lexnames_text(), encoding="utf-8")
        if (source / "index.sense").is_file():  # Debian's wordnet-sense-index, if installed
            shutil.copyfile(source / "index.sense", tmp / "index.sense")
        else:
            (tmp / "index.sense").write_text("", encoding="utf-8")
            (tmp / "index.sense").write_text("".join(_index_sense_lines(tmp)), encoding="utf-8")
        try:
            os.replace(tmp, target)  # atomic; loses harmlessly to a concurrent provisioner
        except OSError:
            if not (target / "lexnames").is_file():
                raise
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return data_dir


def check_wordnet() -> Path:
    """Where nltk finds WordNet (provisioned from Debian's files if needed), without loading it —
    loading reads the whole database, seconds — for checks before a run; raises
    :class:`WordNetUnavailable` naming the fix."""
    import nltk

    def found() -> Path | None:
        try:
            where = Path(str(nltk.data.find("corpora/wordnet")))
        except LookupError:
            return None
        # a directory needs the lexnames file Debian lacks; nltk's own download is a zip
        return where if where.suffix == ".zip" or (where / "lexnames").is_file() else None

    where = found()
    if where is None:
        data_dir = provision()
        if str(data_dir) not in nltk.data.path:
            nltk.data.path.insert(0, str(data_dir))
        where = found()
    if where is None:
        raise WordNetUnavailable(f"nltk finds no usable WordNet on its path {nltk.data.path}; {FIX}")
    return where


def ensure_wordnet() -> object:
    """Return a loaded ``nltk.corpus.wordnet``, provisioning it from Debian's files if needed."""
    import nltk
    from nltk.corpus import wordnet

    try:
        wordnet.ensure_loaded()
        return wordnet
    except LookupError:
        pass
    data_dir = provision()
    if str(data_dir) not in nltk.data.path:
        nltk.data.path.insert(0, str(data_dir))
    try:
        wordnet.ensure_loaded()
    except LookupError as e:
        raise WordNetUnavailable(f"nltk cannot load WordNet even from {data_dir}: {e}; {FIX}") from e
    return wordnet


def wordnet_version() -> str:
    """The WordNet version nltk reads (as ``wordnet.get_version()`` says it), from the header of its
    ``data.adj`` alone: naming the version in a run's provenance does not load the database (seconds)."""
    import nltk

    try:
        pointer = nltk.data.find("corpora/wordnet/data.adj")
    except LookupError:
        data_dir = provision()
        if str(data_dir) not in nltk.data.path:
            nltk.data.path.insert(0, str(data_dir))
        pointer = nltk.data.find("corpora/wordnet/data.adj")
    with pointer.open() as fh:
        for _, raw in zip(range(64), fh):
            line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            if m := re.search(r"Word[nN]et (\d+|\d+\.\d+) Copyright", line):
                return m.group(1)
    return ensure_wordnet().get_version()  # an unusual header: ask nltk's reader
