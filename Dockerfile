# EoK service image: the API and web page (`eok serve`), with the toolchain to evaluate kernels for the
# emulated K1 (clang-22/lld-22/llvm-22 from Debian 12's security suite, qemu-user 7.2, the riscv64 libc and
# libgcc), the same packages scripts/setup.sh installs for the main job. Neo4j runs in its own container
# (docker-compose.yml). Pinned to bookworm: clang-22 comes from Debian 12's security suite.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    EOK_HOME=/data/eok \
    EOK_API_HOST=0.0.0.0 \
    EOK_API_PORT=8000

RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        clang-22 lld-22 llvm-22 qemu-user libc6-dev-riscv64-cross libgcc-12-dev-riscv64-cross \
        git ca-certificates \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Dependencies first, so code edits do not reinstall them.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir torch --index-url https://download.pytorch.org/whl/cpu \
    && pip install --no-cache-dir -r /tmp/requirements.txt
COPY core ./core
COPY knowledge ./knowledge
COPY evaluator ./evaluator
COPY miners ./miners
COPY agent ./agent
COPY service ./service
COPY cypher ./cypher
# Editable: cypher/ and the task suite are read from the source tree, found relative to the packages.
RUN pip install --no-cache-dir --no-deps -e . \
    && useradd --create-home --uid 10001 eok \
    && mkdir -p /data/eok && chown -R eok /data/eok
USER eok
VOLUME ["/data/eok"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4).status == 200 else 1)"
# The graph lives in the neo4j service: never start a local one here.
CMD ["eok", "serve", "--no-start-db"]
