"""Page language → Postgres text-search configuration (``simple`` when there is none).

The names are Postgres's built-in configurations (``\\dF``); a configuration missing from the
server (an older Postgres) falls back to ``simple`` in SQL, so this table may list more.
"""

from __future__ import annotations

FALLBACK = "simple"

CONFIGS: dict[str, str] = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish", "nl": "dutch",
    "en": "english", "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "no": "norwegian", "nb": "norwegian", "nn": "norwegian", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}


def config_for(lang: str | None) -> str:
    """The configuration name for an ISO 639 code (``"en"`` → ``"english"``), else ``simple``."""
    return CONFIGS.get((lang or "").lower(), FALLBACK)
