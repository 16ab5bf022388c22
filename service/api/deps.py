"""Dependency aliases the routers declare: the service's shared parts and the caller's role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from core.settings import Settings
from knowledge.retrieval import Retriever
from knowledge.store import GraphStore
from service.api.cypher import ReadOnlyCypher, SavedQuery
from service.api.run_manager import RunManager
from service.api.security import Caller, KeyRing, Role, require
from service.bootstrap import Container


@dataclass
class ServiceState:
    """Built once by the app's lifespan; routes reach it through the aliases below."""

    settings: Settings
    container: Container
    keys: KeyRing
    queries: dict[str, SavedQuery]
    cypher: ReadOnlyCypher
    runs: RunManager


def get_state(request: Request) -> ServiceState:
    return request.app.state.eok


def get_store(request: Request) -> GraphStore:
    return get_state(request).container.store


def get_retriever(request: Request) -> Retriever:
    return get_state(request).container.retriever


def get_runs(request: Request) -> RunManager:
    return get_state(request).runs


def get_cypher(request: Request) -> ReadOnlyCypher:
    return get_state(request).cypher


StateDep = Annotated[ServiceState, Depends(get_state)]
StoreDep = Annotated[GraphStore, Depends(get_store)]
RetrieverDep = Annotated[Retriever, Depends(get_retriever)]
RunsDep = Annotated[RunManager, Depends(get_runs)]
CypherDep = Annotated[ReadOnlyCypher, Depends(get_cypher)]

ReaderKey = Annotated[Caller, Depends(require(Role.READER))]
AnalystKey = Annotated[Caller, Depends(require(Role.ANALYST))]
OperatorKey = Annotated[Caller, Depends(require(Role.OPERATOR))]
