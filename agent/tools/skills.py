"""`load_skill`: the full text of a skill whose one-line index entry is in the prompt."""

from __future__ import annotations

from pydantic import Field

from ..context.skills import find_skill, load_skills
from .base import Args, Tool, ToolContext, ToolError


class LoadSkill(Tool):
    name = "load_skill"
    description = "Read a skill from the Skills list in your instructions before following it."

    class Arguments(Args):
        name: str = Field(min_length=1, max_length=100)

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        folder = ctx.workspace.root / "skills"
        skill = find_skill(folder, args.name)
        if skill is None:
            names = ", ".join(s.name for s in load_skills(folder)) or "none are installed"
            raise ToolError(f"there is no skill named {args.name!r}", f"use one of: {names}")
        try:
            body = skill.body()
        except (OSError, ValueError) as exc:
            raise ToolError(f"skill {skill.name} could not be read: {exc}", "tell the user the skill file is broken") from None
        rel = skill.path.relative_to(ctx.workspace.root).as_posix()
        return f"# Skill: {skill.name} ({rel})\n\n{body}"
