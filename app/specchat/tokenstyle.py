"""Token-kind colours and meanings shared by the window and the terminal (no Qt here)."""

from __future__ import annotations

from specchat.engine.types import TokenKind

# Okabe & Ito's palette ("Color Universal Design", 2008): distinguishable with every common
# colour-vision deficiency.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

#: The saturated colour of each kind: legend swatches, underlines, terminal text.
TOKEN_ACCENTS: dict[TokenKind, str] = {
    TokenKind.ACCEPTED: OKABE_ITO["sky_blue"],
    TokenKind.CORRECTED: OKABE_ITO["orange"],
    TokenKind.BONUS: OKABE_ITO["bluish_green"],
    TokenKind.PLAIN: "#999999",
}

#: The non-colour cue of each kind, so the transcript reads without colour vision too.
TOKEN_CUES: dict[TokenKind, str] = {
    TokenKind.ACCEPTED: "tinted",
    TokenKind.CORRECTED: "underlined",
    TokenKind.BONUS: "tinted, dotted underline",
    TokenKind.PLAIN: "no tint",
}

#: What each kind means, for legends and tooltips.
TOKEN_MEANINGS: dict[TokenKind, str] = {
    TokenKind.ACCEPTED: "draft token the target accepted",
    TokenKind.CORRECTED: "target's token replacing a rejected draft",
    TokenKind.BONUS: "target's extra token after a fully accepted draft",
    TokenKind.PLAIN: "ordinary target step (no draft)",
}


def ansi(kind: TokenKind) -> str:
    """24-bit ANSI escape for a kind's colour; corrected tokens are also underlined."""
    if kind == TokenKind.PLAIN:
        return ""
    red, green, blue = (int(TOKEN_ACCENTS[kind][i : i + 2], 16) for i in (1, 3, 5))
    underline = "\x1b[4m" if kind == TokenKind.CORRECTED else ""
    return f"{underline}\x1b[38;2;{red};{green};{blue}m"


ANSI_RESET = "\x1b[0m"
