"""Skills: `skills/<name>/SKILL.md` with YAML frontmatter. Only the index enters the prompt.

The skills folder is `<workspace>/skills`; SKILL.md files are read through folder descriptors
from the workspace root (workspace/fdpath.py), so a skill linked out of the workspace is
skipped with a warning instead of putting an outside file into the prompt or a tool result.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from clawgate.workspace.fdpath import locate, read_all

log = logging.getLogger(__name__)
_warned: dict[str, str] = {}  # SKILL.md path -> the problem last warned about
# Each skill by its SKILL.md path, kept while the file's size and mtime stay the same: every new
# session's prompt lists the skills, and parsing YAML each time cost more than the rest of the prompt.
_parsed: dict[str, tuple[tuple[int, int], Skill]] = {}


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path

    def body(self) -> str:
        return _split(_read(self.path))[1].strip()


def _read(path: Path) -> str:
    """A SKILL.md's text, read from the workspace root (`skills/`'s parent) through descriptors."""
    root = path.parent.parent.parent
    with locate(root, str(path)) as loc:
        return read_all(loc).decode("utf-8")


def _split(text: str) -> tuple[str, str]:
    if not text.startswith("---"):
        raise ValueError("missing YAML frontmatter (the file must start with '---')")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise ValueError("frontmatter is not closed with '---'")
    return parts[0][3:], parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""


def _skill_files(folder: str | Path) -> list[tuple[str, os.stat_result | OSError]] | None:
    """Each `<entry>/SKILL.md` of the folder, sorted, with its stat (or why it could not be read); None: no
    skills folder. One listing and one stat per entry, on plain path strings: every new session's prompt
    reads them, often enough for path objects to show."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except OSError:  # no skills folder (or not a folder)
        return None
    found: list[tuple[str, os.stat_result | OSError]] = []
    for entry in names:
        where = os.path.join(os.fspath(folder), entry, "SKILL.md")
        try:
            found.append((where, os.stat(where)))
        except (FileNotFoundError, NotADirectoryError):  # not a skill's folder
            continue
        except OSError as exc:
            found.append((where, exc))
    return found


def load_skills(folder: Path) -> list[Skill]:
    """Valid skills sorted by name; a broken one is skipped with one warning, never fatal."""
    skills: list[Skill] = []
    for where, st in _skill_files(folder) or []:
        try:
            if isinstance(st, OSError):
                raise st
            skill = _skill(where, st)
            if any(s.name == skill.name for s in skills):
                raise ValueError(f"another skill is already named {skill.name!r}")
            skills.append(skill)
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if _warned.get(where) != problem:  # one warning per broken file, not one per prompt build
                _warned[where] = problem
                log.warning("skill %s skipped: %s (fix its frontmatter: name and description between '---' lines)",
                            where, problem)
    return sorted(skills, key=lambda s: s.name)


def skills_stamp(folder: str) -> tuple[tuple[str, int, int, int] | str, ...] | None:
    """What `load_skills(folder)` reads, as (SKILL.md, its mtime, size, inode): equal stamps list the same
    skills. None: no skills folder."""
    found = _skill_files(folder)
    if found is None:
        return None
    return tuple(where if isinstance(st, OSError) else (where, st.st_mtime_ns, st.st_size, st.st_ino)
                 for where, st in found)


def _skill(where: str, st: os.stat_result) -> Skill:
    """The skill of one SKILL.md (`st`: its stat); parsed again only when the file changed."""
    stamp = (st.st_size, st.st_mtime_ns)
    cached = _parsed.get(where)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    import yaml  # imported by the first prompt build that finds a skill, not at start-up

    path = Path(where)
    try:
        meta = yaml.safe_load(_split(_read(path))[0]) or {}
    except yaml.YAMLError as exc:
        raise ValueError(str(exc) or type(exc).__name__) from exc
    if not isinstance(meta, dict):
        raise ValueError("frontmatter is not a mapping")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("frontmatter has no 'name'")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("frontmatter has no 'description'")
    _parsed[where] = (stamp, skill := Skill(name.strip(), " ".join(description.split()), path))
    return skill


def find_skill(folder: Path, name: str) -> Skill | None:
    """The valid skill called `name` (case-insensitive), or None."""
    wanted = name.strip().lower()
    return next((s for s in load_skills(folder) if s.name.lower() == wanted), None)
