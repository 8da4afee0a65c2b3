"""deploy/kubernetes, validated offline against the Kubernetes API schemas
(k8s_validate.py, on python3-kubernetes' generated models), plus what the manifests
promise: the settings are real settings, probes and drain timing fit together, the
security context is the image's least privilege, the SPIRE socket reaches Envoy only,
and the autoscaling rules pass promtool (syntax and a unit test on sample series).
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml

import k8s_validate as kv
import hxstest
from conftest import ROOT

K8S = ROOT / "deploy" / "kubernetes"


def rendered() -> List[Tuple[str, Dict[str, Any]]]:
    """The documents kustomization.yaml lists, in order, then the autoscaling ones."""
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = [K8S / f for f in kust["resources"]] + [K8S / "autoscaling" / "hpa.yaml"]
    docs = []
    for f in files:
        for i, d in enumerate(yaml.safe_load_all(f.read_text())):
            if d is not None:
                docs.append((f"{f.relative_to(ROOT)}#{i}", d))
    return docs


def test_manifests_validate_against_the_api_schemas() -> None:
    errors = kv.check_set(rendered())
    assert errors == [], "\n".join(errors)


@pytest.mark.parametrize("mutate,expected", [
    (lambda d: kv.find(d, "Deployment")["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicy2="x"),
     "imagePullPolicy2: unknown field"),
    (lambda d: kv.find(d, "ConfigMap", "hexr-sandbox-settings")["data"].update(MAX_MEMORY_MB=512),
     "must be a string"),
    (lambda d: kv.find(d, "Deployment")["spec"]["template"]["spec"]["containers"][0].pop("name"),
     "name: required"),
    (lambda d: kv.find(d, "Deployment")["spec"]["selector"]["matchLabels"].update(app="other"),
     "does not match the pod template"),
    (lambda d: kv.find(d, "Deployment")["spec"]["template"]["spec"]["containers"][0]["securityContext"]
     .update(allowPrivilegeEscalation=False), "allowPrivilegeEscalation cannot be false"),
    (lambda d: kv.find(d, "Service")["spec"]["ports"][0].update(targetPort="nope"), "names no container port"),
])
def test_the_validator_catches_broken_manifests(mutate, expected: str) -> None:
    docs = copy.deepcopy(rendered())
    mutate(docs)
    errors = kv.check_set(docs)
    assert any(expected in e for e in errors), errors


def known_settings() -> set:
    r = subprocess.run([hxstest.BIN, "serve", "--help"], capture_output=True, text=True, timeout=30)
    return {m.group(1) for m in re.finditer(r"^  ([A-Z][A-Z0-9_]+)  ", r.stdout, re.M)}


def test_configmap_names_only_real_settings() -> None:
    settings = known_settings()
    assert "LISTEN_ADDRESS" in settings and "MAX_EXECUTION_TIME" in settings
    data = kv.find(rendered(), "ConfigMap", "hexr-sandbox-settings")["data"]
    unknown = sorted(set(data) - settings)
    assert unknown == [], f"not settings of the service: {unknown}"


def pod_spec() -> Dict[str, Any]:
    return kv.find(rendered(), "Deployment")["spec"]["template"]["spec"]


def container(name: str) -> Dict[str, Any]:
    return next(c for c in pod_spec()["containers"] if c["name"] == name)


def seconds(text: str) -> int:
    m = re.fullmatch(r"(\d+)(s|m)?", text)
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def test_grace_period_lets_a_drain_finish() -> None:
    data = kv.find(rendered(), "ConfigMap", "hexr-sandbox-settings")["data"]
    svc = container("hexr-sandbox")
    pre = int(svc["lifecycle"]["preStop"]["exec"]["command"][-1])
    drain = seconds(data["DRAIN_TIMEOUT"])
    grace = pod_spec()["terminationGracePeriodSeconds"]
    assert grace >= pre + drain + 10, "preStop + DRAIN_TIMEOUT + the service's exit grace must fit"
    envoy_pre = int(container("envoy")["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pre + drain <= envoy_pre < grace, "Envoy must keep proxying while the service drains"


def test_readiness_is_the_services_health_and_liveness_tolerates_draining() -> None:
    svc = container("hexr-sandbox")
    assert svc["readinessProbe"]["httpGet"]["path"] == "/health"
    assert "(200, 503)" in svc["livenessProbe"]["exec"]["command"][-1]
    envoy = yaml.safe_load(kv.find(rendered(), "ConfigMap", "hexr-sandbox-envoy")["data"]["envoy.yaml"])
    health = next(l for l in envoy["static_resources"]["listeners"] if l["name"] == "health")
    routes = health["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
    assert [r["match"] for r in routes] == [{"path": "/health"}], "the plain listener serves /health only"


def test_security_context_is_the_images_least_privilege() -> None:
    sc = container("hexr-sandbox")["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN", "SETPCAP", "SETUID", "SETGID"]}
    assert sc["privileged"] is False and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    run_sh = (ROOT / "deploy" / "container" / "run.sh").read_text()
    for cap in sc["capabilities"]["add"]:
        assert f"--cap-add {cap}" in run_sh, f"run.sh and the manifests differ on {cap}"


def test_spiffe_identity_reaches_envoy_only() -> None:
    mounts = {c["name"]: {m["name"] for m in c.get("volumeMounts", [])} for c in pod_spec()["containers"]}
    assert "spire-agent-socket" in mounts["envoy"]
    assert "spire-agent-socket" not in mounts["hexr-sandbox"]
    data = kv.find(rendered(), "ConfigMap", "hexr-sandbox-settings")["data"]
    assert data["LISTEN_ADDRESS"].startswith("127.0.0.1:") and data["TRUSTED_PROXIES"] == "127.0.0.1"
    envoy = yaml.safe_load(kv.find(rendered(), "ConfigMap", "hexr-sandbox-envoy")["data"]["envoy.yaml"])
    main = next(l for l in envoy["static_resources"]["listeners"] if l["name"] == "sandbox")
    hcm = main["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["forward_client_cert_details"] == "SANITIZE_SET"
    assert main["filter_chains"][0]["transport_socket"]["typed_config"]["require_client_certificate"] is True


RULES_TEST = """
rule_files: [ {rules} ]
evaluation_interval: 1m
tests:
- interval: 1m
  input_series:
  - series: 'hexr_sandbox_active_executions{{namespace="hs",pod="a"}}'
    values: '4x10'
  - series: 'hexr_sandbox_queued_executions{{namespace="hs",pod="a"}}'
    values: '2x10'
  - series: 'hexr_sandbox_max_concurrent_executions{{namespace="hs",pod="a"}}'
    values: '4x10'
  - series: 'hexr_sandbox_draining{{namespace="hs",pod="a"}}'
    values: '0x10'
  - series: 'hexr_sandbox_active_executions{{namespace="hs",pod="b"}}'
    values: '1x10'
  - series: 'hexr_sandbox_queued_executions{{namespace="hs",pod="b"}}'
    values: '0x10'
  - series: 'hexr_sandbox_max_concurrent_executions{{namespace="hs",pod="b"}}'
    values: '4x10'
  - series: 'hexr_sandbox_draining{{namespace="hs",pod="b"}}'
    values: '1x10'
  promql_expr_test:
  - expr: hexr_sandbox_slot_demand
    eval_time: 5m
    exp_samples:
    - labels: 'hexr_sandbox_slot_demand{{namespace="hs",pod="a"}}'
      value: 1.5
    - labels: 'hexr_sandbox_slot_demand{{namespace="hs",pod="b"}}'
      value: 0.25
  - expr: hexr_sandbox:capacity_slots:sum
    eval_time: 5m
    exp_samples:
    - labels: 'hexr_sandbox:capacity_slots:sum'
      value: 4
"""


def test_autoscaling_rules_pass_promtool(tmp_path: Path) -> None:
    rules = K8S / "autoscaling" / "rules.yaml"
    r = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    t = tmp_path / "rules_test.yaml"
    t.write_text(RULES_TEST.format(rules=str(rules)))
    r = subprocess.run(["promtool", "test", "rules", str(t)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hpa_scales_the_deployment_on_the_recorded_metric() -> None:
    hpa = kv.find(rendered(), "HorizontalPodAutoscaler")
    names = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]]
    rules = yaml.safe_load((K8S / "autoscaling" / "rules.yaml").read_text())
    recorded = {r.get("record") for g in rules["groups"] for r in g["rules"]}
    assert set(names) <= recorded
