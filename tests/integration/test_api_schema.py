"""Property-based checks of the whole API against its own OpenAPI schema (schemathesis), over real HTTP.

Every operation gets generated requests (valid and invalid) with an operator key against a live server on
127.0.0.1: no response may be a 5xx, and every response must match the published schema (status code,
content type, headers, body). The schema is the app's own /openapi.json document.

One built-in check is left out: positive_data_acceptance expects every schema-valid request to succeed,
but some valid-looking inputs are semantically wrong (a random string is valid JSON for `query` of
POST /cypher but not valid Cypher; a random `cursor` was not issued by the API). Those get a 4xx with a
clear message, which the other checks still hold to the schema.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from service.api.app import create_app
from tests.integration.conftest import OPERATOR_KEY

# Starting or resuming a bootstrap plans suite-wide work (up to every task x target at budget 2000): generated
# valid bodies would keep the machine busy for hours. Their validation and auth are in test_api_bootstraps.py.
# Left out to keep the suite's time, each checked elsewhere: GET /graph/schema takes no input (25 generated
# requests would be one request 25 times); POST /cypher/plan takes POST /cypher's body through its guard
# (both fuzzed here); GET /runs/{id}/artefacts takes only the run id, as GET /runs/{id} does (fuzzed here).
# Their answers' shapes: test_api_cypher.py::test_graph_schema_and_plan, test_api_knowledge.py (artefacts).
schema = (
    schemathesis.openapi.from_dict(create_app(warm=False).openapi())
    .exclude(method="POST", path_regex=r"^/bootstraps")
    .exclude(method="GET", path_regex=r"^/graph/schema$")
    .exclude(method="POST", path_regex=r"^/cypher/plan$")
    .exclude(method="GET", path_regex=r"^/runs/\{run_id\}/artefacts$")
)
# A body over the size limit is rejected with 413 before it is parsed: a rejection like any 4xx. (Without
# this, a generated 240 kB invalid query was reported as "schema-violating request accepted".)
schema.config.checks.negative_data_rejection.expected_statuses = [
    *schema.config.checks.negative_data_rejection.expected_statuses,
    "413",
]


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: schemathesis.Case, live_api: str) -> None:
    case.call_and_validate(
        base_url=live_api,
        headers={"X-API-Key": OPERATOR_KEY},
        excluded_checks=[positive_data_acceptance],
        timeout=30,
    )
