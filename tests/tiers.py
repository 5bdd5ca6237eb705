"""Which tests run in which pass of `make test`: read by tests/conftest.py (the markers) and by
tools/test_tiers.py, which gives the PostgreSQL pass only these files to collect (its workers then
import ~40 test modules, not all ~220). No imports: the tiers' runner reads it as a plain file."""

# The tests whose behaviour depends on the database: `make test` runs them (marker `db`) a second
# time on PostgreSQL. The rest reach the database only through what these already cover.
DATABASE_TESTS = (
    "tests/store/",
    "tests/lifecycle/",
    "tests/tds/",
    "tests/pipelines/",
    "tests/api/test_accounts.py",
    "tests/api/test_audit.py",
    "tests/api/test_auth.py",
    "tests/api/test_bad_input.py",
    "tests/api/test_crash.py",
    "tests/api/test_events.py",
    "tests/api/test_failover.py",
    "tests/api/test_jobs.py",
    "tests/api/test_limits.py",
    "tests/api/test_metrics.py",
    "tests/api/test_mlflow.py",
    "tests/api/test_models.py",
    "tests/api/test_openapi_fuzz.py",
    "tests/api/test_operations.py",
    "tests/api/test_paging.py",
    "tests/api/test_secrets.py",
    # the experiments' crash, halt, goal and parallelism tests
    "tests/hpo/test_experiments.py::test_*kill9*",
    "tests/hpo/test_experiments.py::test_*halt*",
    "tests/hpo/test_experiments.py::test_*goal*",
    "tests/hpo/test_experiments.py::test_*parallel*",
)
