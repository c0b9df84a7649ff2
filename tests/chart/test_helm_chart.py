"""The Helm chart: lint, golden renders, Kubernetes schema validation and the behaviour operators rely on.

Renders offline with real Helm v4 (helm-python-sdk); no helm binary, no cluster.
Regenerate the golden renders after a deliberate chart change: python tools/render_chart.py --update
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "ragmesh"
K8S_VERSION = "1.33"
GPU_COMPONENTS = {"embedder", "reranker"}
HEALTH_PORT = 8086  # mtls.healthPort
GRPC_PORTS = {
    "parser": 50051,
    "embedder": 50052,
    "retriever": 50053,
    "reranker": 50054,
    "graph": 50055,
    "answerer": 50056,
}

_spec = importlib.util.spec_from_file_location("render_chart", ROOT / "tools" / "render_chart.py")
assert _spec is not None and _spec.loader is not None
render_chart = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_chart)

SCENARIOS = {p.name: p for p in render_chart.scenarios()}


DEV_AUTH = {"auth": {"jwtSecret": {"name": "ragmesh-dev", "key": "jwt-secret"}}}


def _docs(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return render_chart.documents(render_chart.render({**DEV_AUTH, **(values or {})}))


def _scenario_docs(name: str) -> list[dict[str, Any]]:
    return _docs(render_chart.load_values(SCENARIOS[name] / "values.yaml"))


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Objects of one kind by component (by name for the namespace-wide ones, which belong to none)."""
    return {
        d["metadata"]["labels"].get("app.kubernetes.io/component", d["metadata"]["name"]): d
        for d in docs
        if d["kind"] == kind
    }


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_scenarios_exist() -> None:
    assert {"default", "gpu", "weaviate", "hardened"} <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_lint_is_clean(scenario: str) -> None:
    values = render_chart.load_values(SCENARIOS[scenario] / "values.yaml")
    report = helm.lint(CHART, values, strict=True, kube_version=f"v{K8S_VERSION}.0")
    assert report["errors"] == []
    # severity 2 = warning, 3 = error (1 = info, e.g. "icon is recommended")
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_golden_render_is_current(scenario: str) -> None:
    path = SCENARIOS[scenario]
    fresh = render_chart.render(render_chart.load_values(path / "values.yaml"))
    assert (path / "rendered.yaml").read_text() == fresh, (
        f"{scenario}: golden render is stale; run python tools/render_chart.py --update and review the diff"
    )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_manifest_validates_against_kubernetes(scenario: str) -> None:
    docs = render_chart.documents((SCENARIOS[scenario] / "rendered.yaml").read_text())
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "ServiceAccount", "PodDisruptionBudget", "Job"} <= kinds
    for doc in docs:
        if doc["apiVersion"] == "cert-manager.io/v1":  # a CRD: no schema in kubernetes-validate
            assert doc["kind"] == "Certificate" and doc["spec"]["secretName"] and doc["spec"]["issuerRef"]["name"]
            continue
        if doc["apiVersion"] in ("monitoring.coreos.com/v1", "gateway.networking.k8s.io/v1"):  # CRDs too
            _check_crd_object(doc)
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _check_crd_object(doc: dict[str, Any]) -> None:
    """The fields the Prometheus operator and Gateway API need (their CRDs are not in kubernetes-validate)."""
    spec = doc["spec"]
    if doc["kind"] == "ServiceMonitor":
        assert spec["selector"]["matchLabels"] and spec["endpoints"]
        assert all(e["port"] and e["path"] == "/metrics" for e in spec["endpoints"])
    elif doc["kind"] == "PodMonitor":
        assert spec["selector"]["matchLabels"] and all(e["port"] == "metrics" for e in spec["podMetricsEndpoints"])
    elif doc["kind"] == "HTTPRoute":
        assert spec["parentRefs"] and all(r["name"] for r in spec["parentRefs"])
        assert all(b["name"] and b["port"] for rule in spec["rules"] for b in rule["backendRefs"])
    else:
        raise AssertionError(f"unexpected custom resource {doc['apiVersion']} {doc['kind']}")


def test_gpu_limits_tolerations_and_cuda_images_only_on_embedder_and_reranker() -> None:
    deployments = _by_kind(_scenario_docs("gpu"), "Deployment")
    assert set(deployments) == {"gateway", "worker", "beat", *GRPC_PORTS}
    for name, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        container = _container(dep)
        limits = container["resources"].get("limits", {})
        tolerations = pod.get("tolerations", [])
        if name in GPU_COMPONENTS:
            assert limits.get("nvidia.com/gpu") == 1, name
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations, name
            assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}, name
            assert container["image"].endswith("-cuda"), name
            assert _env(container)[f"{name.upper()}_DEVICE"] == "cuda"
            assert "replicas" not in dep["spec"], f"{name}: the HPA owns the replica count"
        else:
            assert "nvidia.com/gpu" not in limits, name
            assert tolerations == [], name
            assert not container["image"].endswith("-cuda"), name


def test_gpu_components_autoscale_on_cpu_and_default_stays_on_cpu() -> None:
    hpas = _by_kind(_scenario_docs("gpu"), "HorizontalPodAutoscaler")
    for name in GPU_COMPONENTS:
        spec = hpas[name]["spec"]
        assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"ragmesh-{name}"}
        assert spec["maxReplicas"] > spec["minReplicas"]
        assert spec["metrics"][0]["resource"]["name"] == "cpu"
    default = _scenario_docs("default")
    assert "nvidia.com/gpu" not in render_chart.render(render_chart.load_values(SCENARIOS["default"] / "values.yaml"))
    assert _by_kind(default, "HorizontalPodAutoscaler") == {}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_probes_native_grpc_for_grpc_services_and_http_for_gateway(scenario: str) -> None:
    deployments = _by_kind(_scenario_docs(scenario), "Deployment")
    mtls = render_chart.load_values(SCENARIOS[scenario] / "values.yaml").get("mtls", {}).get("enabled", False)
    for name, port in GRPC_PORTS.items():
        container = _container(deployments[name])
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            # kubelet cannot present a client certificate: with mTLS it checks the plaintext health-only port
            assert container[probe]["grpc"] == {"port": HEALTH_PORT if mtls else port}, f"{name} {probe}"
    gateway = _container(deployments["gateway"])
    assert gateway["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert gateway["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert "exec" in _container(deployments["worker"])["livenessProbe"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_pods_run_restricted(scenario: str) -> None:
    docs = _scenario_docs(scenario)
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "Job")]
    bundled = render_chart.load_values(SCENARIOS[scenario] / "values.yaml").get("modelServer", {}).get("enabled")
    assert len(pods) == 10 + bool(bundled)  # 9 components + the migration job (+ the bundled model server)
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_service_ports_match_containers_and_addr_wiring(scenario: str) -> None:
    docs = _scenario_docs(scenario)
    deployments, services = _by_kind(docs, "Deployment"), _by_kind(docs, "Service")
    services.pop("model-server", None)  # the bundled model server (modelServer.enabled): not a component
    assert set(services) == {"gateway", *GRPC_PORTS}, "every component but the worker has a Service"
    for name, svc in services.items():
        container_ports = {p["name"]: p["containerPort"] for p in _container(deployments[name])["ports"]}
        port, *metrics = svc["spec"]["ports"]
        assert container_ports[port["targetPort"]] == port["port"], name
        # /metrics: the gateway on its HTTP port, every gRPC service on a port of its own (metrics.port)
        assert [(m["name"], m["port"]) for m in metrics] == ([] if name == "gateway" else [("metrics", 9464)]), name
        for m in metrics:
            assert container_ports[m["targetPort"]] == m["port"]
            assert _env(_container(deployments[name]))["RAGMESH_METRICS_PORT"] == "9464"
        assert svc["spec"]["selector"] == deployments[name]["spec"]["selector"]["matchLabels"]
        env = _env(_container(deployments[name]))
        assert env[f"{name.upper()}_PORT"] == str(port["port"])
        assert env[f"{name.upper()}_HOST"] == "0.0.0.0"
    assert services["gateway"]["spec"]["ports"][0]["port"] == 8080
    for client in ("gateway", "worker"):
        env = _env(_container(deployments[client]))
        for name, port in GRPC_PORTS.items():
            assert services[name]["spec"]["ports"][0]["port"] == port
            assert env[f"{name.upper()}_ADDR"] == f"{services[name]['metadata']['name']}:{port}"


def test_worker_runs_celery_from_the_ingestion_image() -> None:
    deployments = _by_kind(_scenario_docs("default"), "Deployment")
    worker, gateway = _container(deployments["worker"]), _container(deployments["gateway"])
    assert worker["command"] == ["celery", "-A", "ragmesh_ingestion.worker", "worker"]
    assert worker["image"] == "ghcr.io/ragmesh/ragmesh-ingestion:0.1.0"
    assert gateway["image"] == "ghcr.io/ragmesh/ragmesh-gateway:0.1.0"
    # its one port: /metrics (RAGMESH_METRICS_PORT, on all addresses), scraped by a PodMonitor (no Service)
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
    assert _env(worker)["RAGMESH_METRICS_PORT"] == "9464" and _env(worker)["RAGMESH_METRICS_HOST"] == "0.0.0.0"


def test_otel_and_store_wiring() -> None:
    deployments = _by_kind(_scenario_docs("weaviate"), "Deployment")
    for name, dep in deployments.items():
        env = _env(_container(dep))
        assert env["OTEL_SERVICE_NAME"] == ("ingest-worker" if name == "worker" else name)
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env  # no collector configured in this scenario
    retriever = _env(_container(deployments["retriever"]))
    assert retriever["RETRIEVER_BACKEND"] == "weaviate"
    assert retriever["WEAVIATE_URL"] == "http://weaviate.weaviate:8080"
    assert retriever["RETRIEVER_DATABASE_URL"] == {"secretKeyRef": {"name": "ragmesh-postgres", "key": "app-dsn"}}
    # the key of the identity assertions row-level security verifies
    assert retriever["RETRIEVER_RLS_KEY"] == {"secretKeyRef": {"name": "ragmesh-postgres", "key": "rls-key"}}
    answerer = _env(_container(deployments["answerer"]))
    assert answerer["OLLAMA_HOST"] == "http://ollama:11434" and answerer["ANSWERER_MODEL"] == "llama3.1:8b"
    graph = _env(_container(deployments["graph"]))
    assert graph["NEO4J_URI"] == "neo4j://neo4j.neo4j:7687"
    gpu = _by_kind(_scenario_docs("gpu"), "Deployment")
    assert _env(_container(gpu["parser"]))["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.observability:4317"
    reranker = _container(gpu["reranker"])
    assert _env(reranker)["RERANKER_MODEL"] == "/models/bge-reranker-v2-m3"
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in reranker["volumeMounts"]


CALLERS = {
    "parser": {"gateway", "worker"},
    "embedder": {"gateway", "worker", "retriever"},
    "retriever": {"gateway", "worker", "graph"},
    "reranker": {"gateway"},
    "graph": {"gateway", "worker"},
    "answerer": {"gateway"},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_network_policies_admit_only_the_callers_by_default(scenario: str) -> None:
    policies = _by_kind(_scenario_docs(scenario), "NetworkPolicy")
    model_server = policies.pop("model-server", None)  # the bundled model server: the answerer only
    if model_server is not None:
        (rule,) = model_server["spec"]["ingress"]
        assert [f["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for f in rule["from"]] == ["answerer"]
    assert set(policies) - {"migrate", "ragmesh-default-deny"} == {"gateway", "worker", "beat", *GRPC_PORTS}
    (gateway_rule,) = policies["gateway"]["spec"]["ingress"]
    assert "from" not in gateway_rule and gateway_rule["ports"] == [{"port": 8080, "protocol": "TCP"}]
    metrics_rule = {"ports": [{"port": 9464, "protocol": "TCP"}]}  # metrics.port; from metrics.scrapeFrom
    scrape_from = render_chart.load_values(SCENARIOS[scenario] / "values.yaml").get("metrics", {}).get("scrapeFrom")
    if scrape_from:
        metrics_rule["from"] = scrape_from
    assert policies["worker"]["spec"]["ingress"] == [metrics_rule]
    for name, port in GRPC_PORTS.items():
        rule, scrape = policies[name]["spec"]["ingress"]
        assert scrape == metrics_rule, name
        callers = {f["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for f in rule["from"]}
        assert callers == CALLERS[name], name
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}]
    assert _by_kind(_docs({"default": {"networkPolicy": {"enabled": False}}}), "NetworkPolicy") == {}
    (retriever,) = [
        d
        for d in _scenario_docs("weaviate")
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "ragmesh-retriever"
    ]
    assert _env(retriever["spec"]["template"]["spec"]["containers"][0])["EMBEDDER_ADDR"] == "ragmesh-embedder:50052"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_internal_identity_signing_key_only_in_gateway_and_worker(scenario: str) -> None:
    deployments = _by_kind(_scenario_docs(scenario), "Deployment")
    secret = {"name": "ragmesh-internal-identity"}
    deployments.pop("model-server", None)  # the bundled model server: no identity of the mesh
    for name, dep in deployments.items():
        env = _env(_container(dep))
        if name == "beat":  # Celery beat sends the connectors' tick: it calls no service and signs nothing
            assert "RAGMESH_INTERNAL_SIGNING_KEY" not in env and "RAGMESH_INTERNAL_PUBLIC_KEY" not in env
        elif name in ("gateway", "worker"):
            assert env["RAGMESH_INTERNAL_SIGNING_KEY"] == {"secretKeyRef": {**secret, "key": "signing-key"}}, name
            assert env["RAGMESH_INTERNAL_TOKEN_TTL_SECONDS"] == "120"
            # the worker also verifies the gateway's ingestion tokens
            assert ("RAGMESH_INTERNAL_PUBLIC_KEY" in env) == (name == "worker")
        else:
            assert env["RAGMESH_INTERNAL_PUBLIC_KEY"] == {"secretKeyRef": {**secret, "key": "public-key"}}, name
            assert "RAGMESH_INTERNAL_SIGNING_KEY" not in env, f"{name} must not be able to mint identities"
    assert _env(_container(deployments["graph"]))["RETRIEVER_ADDR"] == "ragmesh-retriever:50053"
    with pytest.raises(helm.HelmValuesError, match="tokenTtlSeconds"):
        render_chart.render({**DEV_AUTH, "internalIdentity": {"tokenTtlSeconds": 86400}})


def test_migration_job_is_a_pre_install_hook_with_owner_secret() -> None:
    (job,) = [d for d in _scenario_docs("default") if d["kind"] == "Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "ragmesh_retriever.migrate"]
    # secrets reach migrate through the environment, never the command line (visible in ps)
    assert not any("DSN" in arg or "PASSWORD" in arg for arg in container["args"])
    assert "RAGMESH_APP_PASSWORD" in _env(container)
    for name, key in (
        ("RAGMESH_RLS_KEY", "rls-key"),
        ("RAGMESH_TRACES_PASSWORD", "traces-password"),
        ("RAGMESH_RETENTION_PASSWORD", "retention-password"),
    ):
        assert _env(container)[name] == {"secretKeyRef": {"name": "ragmesh-postgres", "key": key}}
    assert _env(container)["RAGMESH_OWNER_DSN"] == {"secretKeyRef": {"name": "ragmesh-postgres", "key": "owner-dsn"}}


def test_component_env_overrides_wired_env_without_duplicates() -> None:
    docs = _docs({"components": {"gateway": {"env": [{"name": "REDIS_URL", "value": "redis://other:6379/1"}]}}})
    env_list = _container(_by_kind(docs, "Deployment")["gateway"])["env"]
    names = [e["name"] for e in env_list]
    assert len(names) == len(set(names))
    assert _env({"env": env_list})["REDIS_URL"] == "redis://other:6379/1"


def test_disabled_component_renders_nothing_and_is_not_wired() -> None:
    docs = _docs({"components": {"graph": {"enabled": False}}})
    assert not [d for d in docs if d["metadata"]["name"] == "ragmesh-graph"]
    env = _env(_container(_by_kind(docs, "Deployment")["gateway"]))
    assert "GRAPH_ADDR" not in env and env["GATEWAY_GRAPH_ENABLED"] == "false"


@pytest.mark.parametrize(
    "values, offending",
    [
        ({"components": {"embedder": {"replcas": 2}}}, "replcas"),
        ({"golbal": {"image": {"tag": "1.0"}}}, "golbal"),
        ({"default": {"autoscaling": {"targetCPU": 50}}}, "targetCPU"),
        ({"components": {"vectorizer": {"port": 1}}}, "vectorizer"),
        ({"retriever": {"backend": "faiss"}}, "backend"),
    ],
)
def test_schema_rejects_unknown_keys_and_bad_values(values: dict[str, Any], offending: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=offending):
        render_chart.render(values)


def test_the_llm_backend_is_chosen_by_values() -> None:
    gpu = _env(_container(_by_kind(_scenario_docs("gpu"), "Deployment")["answerer"]))
    assert gpu["ANSWERER_LLM_BACKEND"] == "openai" and "OLLAMA_HOST" not in gpu
    assert gpu["ANSWERER_OPENAI_BASE_URL"] == "http://vllm.llm:8000/v1"
    assert gpu["ANSWERER_MODEL"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert gpu["ANSWERER_OPENAI_API_KEY"] == {"secretKeyRef": {"name": "ragmesh-llm", "key": "api-key"}}
    default = _env(_container(_by_kind(_scenario_docs("default"), "Deployment")["answerer"]))
    assert default["ANSWERER_LLM_BACKEND"] == "ollama" and "ANSWERER_OPENAI_API_KEY" not in default
    with pytest.raises(helm.HelmError, match=r"stores\.openai\.baseUrl is required"):
        _docs(
            {**render_chart.load_values(SCENARIOS["default"] / "values.yaml"), "stores": {"llm": {"backend": "openai"}}}
        )
    with pytest.raises(helm.HelmValuesError, match="backend"):
        _docs({"stores": {"llm": {"backend": "tgi"}}})
    # under a default deny the answerer reaches the OpenAI-compatible server's port, not Ollama's
    hardened = render_chart.load_values(SCENARIOS["hardened"] / "values.yaml")
    stores = {
        **hardened.get("stores", {}),
        "llm": {"backend": "openai"},
        "openai": {"baseUrl": "http://v:8000/v1", "model": "m"},
    }
    policy = _by_kind(_docs({**hardened, "stores": stores}), "NetworkPolicy")["answerer"]
    ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert 8000 in ports and 11434 not in ports


def test_caller_keys_reach_every_grpc_service_as_the_registry_they_read() -> None:
    from ragmesh_common.tokens import generate_keypair, load_caller_keys

    public = generate_keypair()[1]
    entry = {"caller": "reporting", "publicKey": public, "audiences": ["ragmesh-retriever", "ragmesh-embedder"]}
    values = {
        **render_chart.load_values(SCENARIOS["default"] / "values.yaml"),
        "internalIdentity": {"callerKeys": [entry]},
    }
    deployments = _by_kind(_docs(values), "Deployment")
    for name in GRPC_PORTS:
        (registry,) = load_caller_keys(_env(_container(deployments[name]))["RAGMESH_INTERNAL_CALLER_KEYS"]).values()
        assert registry.caller == "reporting" and registry.audiences == {"ragmesh-retriever", "ragmesh-embedder"}
    assert "RAGMESH_INTERNAL_CALLER_KEYS" not in _env(_container(deployments["gateway"]))
    assert all(
        "RAGMESH_INTERNAL_CALLER_KEYS" not in _env(_container(d))
        for d in _by_kind(_scenario_docs("default"), "Deployment").values()
    )
    # the gateway's audience (every service) is not one a caller key can be given
    with pytest.raises(helm.HelmValuesError, match="audiences"):
        _docs({"internalIdentity": {"callerKeys": [{**entry, "audiences": ["ragmesh-internal"]}]}})


def test_weaviate_backend_requires_a_url() -> None:
    with pytest.raises(helm.HelmError, match=r"stores\.weaviate\.url is required"):
        render_chart.render({**DEV_AUTH, "retriever": {"backend": "weaviate"}})


def test_gateway_auth_must_be_configured() -> None:
    # the gateway refuses to start without it; the chart says so at install time instead
    with pytest.raises(helm.HelmError, match=r"auth\.jwtIssuer and auth\.jwksUrl"):
        render_chart.render({})


def test_redis_password_comes_from_a_secret_and_never_inline() -> None:
    deployments = _by_kind(_scenario_docs("default"), "Deployment")
    for name in ("gateway", "worker"):
        env = _env(_container(deployments[name]))
        assert env["REDIS_PASSWORD"] == {"secretKeyRef": {"name": "ragmesh-redis", "key": "password"}}
        assert "@" not in env["REDIS_URL"]
    for name in ("parser", "embedder", "retriever", "reranker", "graph", "answerer"):
        assert "REDIS_PASSWORD" not in _env(_container(deployments[name])), f"{name} has no business with Redis"
    with pytest.raises(helm.HelmValuesError, match="pattern"):  # a password written into the URL
        render_chart.render({**DEV_AUTH, "stores": {"redis": {"url": "redis://:hunter2@redis:6379/0"}}})


def test_redis_tls_verifies_against_the_ca_from_a_secret() -> None:
    deployments = _by_kind(_scenario_docs("weaviate"), "Deployment")
    for name in ("gateway", "worker"):
        pod = deployments[name]["spec"]["template"]["spec"]
        container = _container(deployments[name])
        env = _env(container)
        assert env["REDIS_URL"].startswith("rediss://")
        [mount] = [m for m in container["volumeMounts"] if m["name"] == "redis-ca"]
        assert mount["readOnly"] and env["REDIS_TLS_CA_FILE"] == f"{mount['mountPath']}/ca.crt"
        [volume] = [v for v in pod["volumes"] if v["name"] == "redis-ca"]
        assert volume["secret"]["secretName"] == "ragmesh-redis-ca"
    assert "redis-ca" not in str(deployments["retriever"])
    with pytest.raises(helm.HelmError, match="rediss://"):
        render_chart.render({**DEV_AUTH, "stores": {"redis": {"tls": {"enabled": True}}}})
    with pytest.raises(helm.HelmError, match=r"tls\.enabled=true"):
        render_chart.render({**DEV_AUTH, "stores": {"redis": {"url": "rediss://redis:6380/0"}}})


def test_the_worker_verifies_ingestion_tokens_with_the_public_key() -> None:
    env = _env(_container(_by_kind(_scenario_docs("default"), "Deployment")["worker"]))
    assert env["RAGMESH_INTERNAL_PUBLIC_KEY"]["secretKeyRef"]["key"] == "public-key"


# ---------- least privilege: what each pod holds and what it may reach ----------

COMPONENTS = ("gateway", "worker", "beat", *GRPC_PORTS)
PUBLIC_KEY = "ragmesh-internal-identity/public-key"
SIGNING_KEY = "ragmesh-internal-identity/signing-key"
APP_DSN = "ragmesh-postgres/app-dsn"
TRACES_DSN = "ragmesh-postgres/traces-dsn"
RLS_KEY = "ragmesh-postgres/rls-key"


def expected_secrets(values: dict[str, Any]) -> dict[str, set[str]]:
    """Each component's secrets (Secret/key) for these values: the table the chart must match, written out."""
    expected = {name: {PUBLIC_KEY} for name in GRPC_PORTS} | {"gateway": {SIGNING_KEY}, "worker": {SIGNING_KEY}}
    expected["beat"] = set()  # Celery beat: the broker only
    for name in ("gateway", "worker"):  # the connectors' definitions, item states and run reports
        expected[name] |= {"ragmesh-postgres/connectors-dsn"}
    expected["retriever"] |= {APP_DSN, RLS_KEY}
    expected["graph"] |= {"ragmesh-neo4j/username", "ragmesh-neo4j/password"}
    # the worker verifies the gateway's ingestion tokens; only the gateway and the worker talk to Redis
    expected["worker"] |= {PUBLIC_KEY}
    redis = values.get("stores", {}).get("redis", {})
    password = redis.get("passwordSecret", {})
    for name in ("gateway", "worker", "beat"):
        expected[name] |= {f"{password.get('name', 'ragmesh-redis')}/{password.get('key', 'password')}"}
        if redis.get("tls", {}).get("enabled"):
            ca = redis["tls"].get("caSecret", {})
            expected[name] |= {f"{ca.get('name', 'ragmesh-redis-ca')}/*"}
    jwt = values.get("auth", {}).get("jwtSecret", {})
    if jwt.get("name"):
        expected["gateway"] |= {f"{jwt['name']}/{jwt.get('key', 'jwt-secret')}"}
    llm_key = values.get("stores", {}).get("openai", {}).get("apiKeySecret", {})
    if values.get("stores", {}).get("llm", {}).get("backend") == "openai" and llm_key.get("name"):
        expected["answerer"] |= {f"{llm_key['name']}/{llm_key['key']}"}
    weaviate = values.get("stores", {}).get("weaviate", {}).get("apiKeySecret", {})
    if values.get("retriever", {}).get("backend") == "weaviate" and weaviate.get("name"):
        expected["retriever"] |= {f"{weaviate['name']}/{weaviate['key']}"}
    if values.get("observability", {}).get("tracesToPostgres"):
        for name in expected:
            expected[name] |= {TRACES_DSN}
        # the admin trace viewer reads spans back as a verified admin identity; retention prunes as its own role
        expected["gateway"] |= {APP_DSN, RLS_KEY, "ragmesh-postgres/retention-dsn"}
    mtls = values.get("mtls", {})
    if mtls.get("enabled"):
        for name in expected:
            shared = mtls.get("secret", {}).get("name")
            expected[name] |= {
                f"{shared}/*" if not mtls.get("certManager", {}).get("enabled") else f"ragmesh-{name}-tls/*"
            }
    return expected


def held_secrets(deployment: dict[str, Any]) -> set[str]:
    """Every Secret (and key) a pod can read: env secretKeyRefs, envFrom Secrets, Secret volumes (all keys)."""
    pod = deployment["spec"]["template"]["spec"]
    held = set()
    for container in pod["containers"]:
        for entry in container.get("env", []):
            ref = entry.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                held.add(f"{ref['name']}/{ref['key']}")
        held |= {f"{e['secretRef']['name']}/*" for e in container.get("envFrom", []) if "secretRef" in e}
    held |= {f"{v['secret']['secretName']}/*" for v in pod.get("volumes", []) if "secret" in v}
    return held


SECRET_SCENARIOS = {
    **{name: None for name in ("default", "gpu", "weaviate", "hardened")},
    "traces-to-postgres": {"observability": {"tracesToPostgres": True}},
    "shared-tls-secret": {"mtls": {"enabled": True, "secret": {"name": "mesh-tls"}}},
}


@pytest.mark.parametrize("scenario", sorted(SECRET_SCENARIOS))
def test_each_pod_holds_only_the_secrets_it_uses(scenario: str) -> None:
    values = SECRET_SCENARIOS[scenario]
    if values is None:
        values = render_chart.load_values(SCENARIOS[scenario] / "values.yaml")
    values = {**DEV_AUTH, **values} if "auth" not in values else values
    deployments = _by_kind(_docs(values), "Deployment")
    held = {name: held_secrets(dep) for name, dep in deployments.items()}
    assert held == expected_secrets(values)
    # what an attacker who owns the parser (Docling on untrusted uploads) gets: no DSN, no user-JWT secret, no
    # graph password, no key that mints identities
    assert not held["parser"] & {APP_DSN, SIGNING_KEY, "ragmesh-neo4j/password", "ragmesh-dev/jwt-secret"}
    assert not any("jwt" in secret for name in held if name != "gateway" for secret in held[name])


# a store by the port its egress rule opens (network.egress.*)
STORE_PORTS = {53: "dns", 5432: "postgres", 6379: "redis", 7687: "neo4j", 11434: "ollama", 4317: "otel", 443: "idp"}
REACHES = {
    "gateway": {
        "dns",
        "parser",
        "embedder",
        "retriever",
        "reranker",
        "graph",
        "answerer",
        "redis",
        "idp",
        "otel",
        "postgres",
    },
    "worker": {"dns", "parser", "embedder", "retriever", "graph", "redis", "otel", "postgres"},  # postgres: connectors
    "beat": {"dns", "redis", "otel"},
    "retriever": {"dns", "embedder", "postgres", "otel"},
    "graph": {"dns", "retriever", "neo4j", "otel"},
    "answerer": {"dns", "ollama", "otel"},
    "parser": {"dns", "otel"},
    "embedder": {"dns", "otel"},
    "reranker": {"dns", "otel"},
    "migrate": {"dns", "postgres"},
}


def reaches(policy: dict[str, Any]) -> set[str]:
    found = set()
    for rule in policy["spec"]["egress"]:
        peers = rule.get("to", [])
        components = {
            p["podSelector"]["matchLabels"].get("app.kubernetes.io/component") for p in peers if "podSelector" in p
        }
        components.discard(None)
        if components:
            (component,) = components
            assert rule["ports"] == [{"port": GRPC_PORTS[component], "protocol": "TCP"}]
            found.add(component)
        else:
            found |= {STORE_PORTS[port["port"]] for port in rule["ports"]}
    return found


def test_each_pod_reaches_only_what_it_uses_under_a_default_deny() -> None:
    policies = _by_kind(_scenario_docs("hardened"), "NetworkPolicy")
    deny = policies.pop("ragmesh-default-deny")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert {name: reaches(policy) for name, policy in policies.items()} == REACHES
    for policy in policies.values():
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    # the stores are where the values say, not anywhere on their port
    (postgres,) = [r for r in policies["retriever"]["spec"]["egress"] if r["ports"][0]["port"] == 5432]
    assert postgres["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "postgres"}}}]
    # spans to PostgreSQL: every component then reaches it (with the insert-only traces role), nothing else changes
    values = {
        **render_chart.load_values(SCENARIOS["hardened"] / "values.yaml"),
        "observability": {"tracesToPostgres": True},
    }
    with_traces = _by_kind(_docs(values), "NetworkPolicy")
    with_traces.pop("ragmesh-default-deny")
    assert {name: reaches(p) for name, p in with_traces.items()} == {n: r | {"postgres"} for n, r in REACHES.items()}


@pytest.mark.parametrize("scenario", ["default", "gpu", "weaviate"])
def test_egress_and_default_deny_are_opt_in(scenario: str) -> None:
    policies = _by_kind(_scenario_docs(scenario), "NetworkPolicy")
    assert "ragmesh-default-deny" not in policies
    assert all(p["spec"]["policyTypes"] == ["Ingress"] and "egress" not in p["spec"] for p in policies.values())


def test_a_default_deny_without_egress_rules_is_refused() -> None:
    with pytest.raises(helm.HelmError, match=r"network\.defaultDeny needs network\.egress\.enabled"):
        render_chart.render({**DEV_AUTH, "network": {"defaultDeny": True}})


def test_mtls_certificates_per_component_and_probes_on_the_health_port() -> None:
    docs = _scenario_docs("hardened")
    certificates = _by_kind(docs, "Certificate")
    assert set(certificates) == set(COMPONENTS)
    for name, dep in _by_kind(docs, "Deployment").items():
        spec = certificates[name]["spec"]
        assert spec["secretName"] == f"ragmesh-{name}-tls"
        assert f"ragmesh-{name}" in spec["dnsNames"] and f"ragmesh-{name}.ragmesh.svc" in spec["dnsNames"]
        assert {"server auth", "client auth"} <= set(spec["usages"])
        assert spec["issuerRef"] == {"name": "ragmesh-mesh-ca", "kind": "Issuer", "group": "cert-manager.io"}
        container = _container(dep)
        env = _env(container)
        assert (env["RAGMESH_TLS_CERT"], env["RAGMESH_TLS_KEY"], env["RAGMESH_TLS_CA"]) == (
            "/etc/ragmesh/tls/tls.crt",
            "/etc/ragmesh/tls/tls.key",
            "/etc/ragmesh/tls/ca.crt",
        )
        assert {"name": "tls", "mountPath": "/etc/ragmesh/tls", "readOnly": True} in container["volumeMounts"]
        if name in GRPC_PORTS:
            assert env["RAGMESH_HEALTH_PORT"] == str(HEALTH_PORT)
            assert {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"} in container["ports"]
        else:
            assert "RAGMESH_HEALTH_PORT" not in env
    assert _by_kind(_scenario_docs("default"), "Certificate") == {}
    with pytest.raises(helm.HelmError, match=r"mtls\.secret\.name"):
        render_chart.render({**DEV_AUTH, "mtls": {"enabled": True}})


def test_spans_are_written_by_the_insert_only_role_and_pruned_by_the_retention_role() -> None:
    docs = _docs({"observability": {"tracesToPostgres": True}})
    deployments = _by_kind(docs, "Deployment")
    secret = "ragmesh-postgres"
    for name, dep in deployments.items():
        env = _env(_container(dep))
        assert env["RAG_TRACES_DSN"] == {"secretKeyRef": {"name": secret, "key": "traces-dsn"}}, name
    gateway = _env(_container(deployments["gateway"]))
    assert gateway["GATEWAY_TRACES_DSN"] == {"secretKeyRef": {"name": secret, "key": "app-dsn"}}
    assert gateway["GATEWAY_TRACES_RLS_KEY"] == {"secretKeyRef": {"name": secret, "key": "rls-key"}}
    assert gateway["GATEWAY_TRACES_RETENTION_DSN"] == {"secretKeyRef": {"name": secret, "key": "retention-dsn"}}


# ---------- what an operator plugs the release into (ingress, monitoring, helm test, a model server) ----------

METRIC_SOURCES = [
    ROOT / "libs" / "ragmesh_common" / "src" / "ragmesh_common" / "metrics.py",
    ROOT / "services" / "gateway" / "src" / "ragmesh_gateway" / "metrics.py",
]


def test_monitors_only_where_the_prometheus_operator_is_or_when_forced() -> None:
    kinds = {d["kind"] for d in _scenario_docs("default")}
    assert not kinds & {"ServiceMonitor", "PodMonitor"}  # no cluster, no CRDs: nothing a plain cluster refuses
    docs = _scenario_docs("operator")
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    (pods,) = [d for d in docs if d["kind"] == "PodMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"http", "metrics"}
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "ragmesh",
        "app.kubernetes.io/instance": "ragmesh",
    }
    assert pods["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    off = {"metrics": {"enabled": False, "serviceMonitor": {"ignoreCapabilities": True}}}
    assert not {d["kind"] for d in _docs(off)} & {"ServiceMonitor", "PodMonitor", "ConfigMap"}
    deployments = _by_kind(_docs(off), "Deployment")
    assert all("RAGMESH_METRICS_PORT" not in _env(_container(d)) for d in deployments.values())


def test_the_grafana_dashboard_charts_metrics_the_code_exports() -> None:
    import json
    import re

    (config_map,) = [d for d in _scenario_docs("operator") if d["kind"] == "ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "ragmesh"}
    dashboard = json.loads(config_map["data"]["ragmesh.json"])
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {re.sub(r"_(total|bucket|count|sum)$", "", m) for e in exprs for m in re.findall(r"ragmesh_[a-z_]+", e)}
    source = "".join(path.read_text() for path in METRIC_SOURCES)
    exported = set(re.findall(r'"(ragmesh_[a-z_]+)"', source))
    assert used and used <= exported, used - exported
    # every exported family is on the dashboard
    assert exported <= used, exported - used


def test_ingress_and_http_route_reach_the_gateway() -> None:
    assert not {d["kind"] for d in _scenario_docs("default")} & {"Ingress", "HTTPRoute"}
    docs = _scenario_docs("operator")
    (ingress,) = [d for d in docs if d["kind"] == "Ingress"]
    (route,) = [d for d in docs if d["kind"] == "HTTPRoute"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"secretName": "ragmesh-tls", "hosts": ["ragmesh.example.com"]}]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "ragmesh-gateway", "port": {"name": "http"}}
    assert route["spec"]["parentRefs"][0]["name"] == "public"
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "ragmesh-gateway", "port": 8080}]


def test_the_gateway_gets_the_dashboard_and_cors_settings() -> None:
    gateway = _env(_container(_by_kind(_scenario_docs("operator"), "Deployment")["gateway"]))
    assert gateway["GATEWAY_SESSION_KEY"] == {"secretKeyRef": {"name": "ragmesh-gateway", "key": "session-key"}}
    assert gateway["GATEWAY_OIDC_CLIENT_ID"] == "ragmesh-dashboard"
    assert gateway["GATEWAY_CORS_ORIGINS"] == "https://portal.example.com"
    assert gateway["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf" and gateway["RAGMESH_LOG_FORMAT"] == "json"
    default = _env(_container(_by_kind(_scenario_docs("default"), "Deployment")["gateway"]))
    assert "GATEWAY_CORS_ORIGINS" not in default and "GATEWAY_SESSION_KEY" not in default


def _helm_test_pod(values: dict[str, Any]) -> dict[str, Any]:
    (pod,) = [d for d in _docs(values) if d["kind"] == "Pod"]
    return pod


class _FakeGateway:
    """A stand-in gateway for the helm test's script: /readyz and an authenticated /api/v1/search."""

    def __init__(self, ready: int, token: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._reply(ready if self.path == "/readyz" else 404, b'{"status": "ok"}')

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                authorized = self.headers.get("Authorization") == f"Bearer {token}"
                self._reply(200 if authorized else 401, b'{"results": []}' if authorized else b'{"detail": "no"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.mark.parametrize(
    ("ready", "token", "expected"),
    [(200, "good", 0), (503, "good", 1), (200, "bad", 1), (200, "", 0)],
)
def test_helm_test_checks_readiness_and_one_authenticated_search(ready: int, token: str, expected: int) -> None:
    import subprocess
    import sys

    pod = _helm_test_pod({"helmTest": {"tokenSecret": {"name": "ragmesh-helm-test", "key": "token"}}})
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    env = _env(container)
    assert env["GATEWAY_URL"] == "http://ragmesh-gateway:8080"
    assert env["TEST_TOKEN"] == {"secretKeyRef": {"name": "ragmesh-helm-test", "key": "token"}}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "TEST_TOKEN" not in _env(_helm_test_pod({})["spec"]["containers"][0])  # no secret: readiness only
    gateway = _FakeGateway(ready, "good")
    try:
        run = subprocess.run(
            [sys.executable, *container["command"][1:], *container["args"]],
            env={"GATEWAY_URL": gateway.url, "TEST_TIMEOUT_SECONDS": "10", "TEST_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        gateway.server.shutdown()
    assert run.returncode == expected, run.stdout + run.stderr


def test_the_bundled_model_server_serves_the_answerer_only() -> None:
    docs = _scenario_docs("operator")
    server = _by_kind(docs, "Deployment")["model-server"]
    container = _container(server)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    args = container["args"]
    assert args[args.index("--model") + 1] == "/models/llm/model.gguf"
    assert args[args.index("--n-gpu-layers") + 1] == "999"
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert _by_kind(docs, "Service")["model-server"]["spec"]["ports"][0]["port"] == 8080
    assert "model-server" not in _by_kind(_scenario_docs("default"), "Deployment")
    # the answerer talks to it over its OpenAI-compatible API, by the Service's name
    env = {e["name"]: e.get("value") for e in _container(_by_kind(docs, "Deployment")["answerer"])["env"]}
    service = _by_kind(docs, "Service")["model-server"]["metadata"]["name"]
    assert env["ANSWERER_LLM_BACKEND"] == "openai"
    assert env["ANSWERER_OPENAI_BASE_URL"] == f"http://{service}:8080/v1"
    assert env["ANSWERER_MODEL"] == "ragmesh-llm" and "OLLAMA_HOST" not in env
    # under egress rules, the answerer may reach it (and the other components may not)
    policies = _by_kind(
        _docs({"modelServer": {"enabled": True}, "network": {"egress": {"enabled": True}}}), "NetworkPolicy"
    )
    for name, policy in policies.items():
        targets = [
            peer["podSelector"]["matchLabels"].get("app.kubernetes.io/component")
            for rule in policy["spec"].get("egress", [])
            for peer in rule.get("to", [])
            if "podSelector" in peer
        ]
        assert ("model-server" in targets) == (name == "answerer"), name


@pytest.mark.parametrize(
    ("values", "offending"),
    [
        ({"httpRoute": {"enabled": True}}, "parentRefs"),
        ({"cors": {"origins": ["https://portal.example.com/app"]}}, "origins"),
        ({"global": {"otelProtocol": "http/json"}}, "otelProtocol"),
        ({"metrics": {"serviceMonitor": {"interval": "often"}}}, "interval"),
        ({"ingress": {"enabled": True, "hosts": [{"host": "x"}]}}, "paths"),
    ],
)
def test_schema_refuses_bad_operator_values(values: dict[str, Any], offending: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=offending):
        render_chart.render({**DEV_AUTH, **values})
