# passhat worker image. Built by docker-compose.yml (services passhat-worker and
# passhat-setup); any other `passhat` command runs in it too, e.g.
#   docker run --rm -e TEMPORAL_ADDRESS=... -e PASSHAT_DB_URL=... passhat:latest passhat report RUN
FROM python:3.11-slim

# LITELLM_LOCAL_MODEL_COST_MAP: litellm would otherwise fetch its model price list from
# GitHub on every import.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

# Only what `pip install .` needs: the project metadata (pyproject names README.md as the
# long description) and the folders that pyproject maps into the `passhat` package.
# Copying them one by one keeps the layer free of whatever else lies in the checkout.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY passhat ./passhat
COPY workflows ./workflows
COPY activities ./activities
COPY domains ./domains
COPY infra ./infra
COPY results ./results
COPY cli ./cli
COPY testing ./testing
# All dependencies ship manylinux wheels, so the slim image needs no compiler.
RUN pip install . && cd / && rm -rf /src

RUN useradd --create-home --uid 10001 passhat
USER passhat
WORKDIR /home/passhat
# With TEMPORAL_ADDRESS and PASSHAT_DB_URL set nothing is written here; without them
# passhat would keep its SQLite store and embedded server under this directory.
ENV PASSHAT_HOME=/home/passhat/.passhat

CMD ["passhat", "worker"]
