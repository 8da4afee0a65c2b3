"""Offline validation of Kubernetes manifests against the API's own schemas.

The schemas are the model classes of Debian's python3-kubernetes (generated from the
Kubernetes OpenAPI specification): for each object, every field must be one the API
defines for that kind (`attribute_map`), of the type it declares (`openapi_types`),
and every field the API requires must be present (the models' setters refuse None
for those: read from their source). On top of the schema, the checks the API server
itself makes that matter here: DNS names, label selectors that match the pod
template, probe and Service ports that name a declared container port, volume mounts
of declared volumes, env names, and allowPrivilegeEscalation=false refused together
with CAP_SYS_ADMIN or privileged.

autoscaling/v2 (GA in Kubernetes 1.23) is checked with the autoscaling/v2beta2
models of this client library (1.22): v2 promoted v2beta2's schema unchanged.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Dict, List, Optional, Tuple

from kubernetes.client import models

KINDS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2beta2HorizontalPodAutoscaler",
}

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
IANA_SVC_NAME = re.compile(r"^(?=.{1,15}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

_required_cache: Dict[str, set] = {}


def required_fields(cls: type) -> set:
    name = cls.__name__
    if name not in _required_cache:
        req = set()
        for attr in cls.openapi_types:
            prop = getattr(cls, attr, None)
            if isinstance(prop, property) and prop.fset is not None:
                try:
                    src = inspect.getsource(prop.fset)
                except (OSError, TypeError):
                    continue
                if "must not be `None`" in src:
                    req.add(attr)
        _required_cache[name] = req
    return _required_cache[name]


def check_value(value: Any, typ: str, path: str, errors: List[str]) -> None:
    if value is None:
        return
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: must be a list of {m.group(1)}")
            return
        for i, v in enumerate(value):
            check_value(v, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: must be a map of string to {m.group(1)}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                errors.append(f"{path}: key {k!r} must be a string")
            check_value(v, m.group(1), f"{path}.{k}", errors)
        return
    if typ == "str":
        if not isinstance(value, str):
            errors.append(f"{path}: must be a string, not {type(value).__name__} {value!r}")
        return
    if typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: must be an integer, not {value!r}")
        return
    if typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append(f"{path}: must be a number, not {value!r}")
        return
    if typ == "bool":
        if not isinstance(value, bool):
            errors.append(f"{path}: must be true or false, not {value!r}")
        return
    if typ in ("object", "datetime", "date"):
        return  # IntOrString and free-form fields; times are set by the server
    cls = getattr(models, typ, None)
    if cls is None:
        errors.append(f"{path}: unknown schema type {typ}")
        return
    check_object(value, cls, path, errors)


def check_object(obj: Any, cls: type, path: str, errors: List[str]) -> None:
    if not isinstance(obj, dict):
        errors.append(f"{path}: must be an object ({cls.__name__})")
        return
    by_json = {v: k for k, v in cls.attribute_map.items()}
    for key, value in obj.items():
        attr = by_json.get(key)
        if attr is None:
            errors.append(f"{path}.{key}: unknown field (not in the {cls.__name__} schema)")
            continue
        check_value(value, cls.openapi_types[attr], f"{path}.{key}", errors)
    for attr in sorted(required_fields(cls)):
        if obj.get(cls.attribute_map[attr]) is None:
            errors.append(f"{path}.{cls.attribute_map[attr]}: required by the {cls.__name__} schema")


# ---- what the API server checks beyond the schema -----------------------------------

def _name(doc: Dict[str, Any]) -> str:
    return (doc.get("metadata") or {}).get("name", "")


def check_metadata(doc: Dict[str, Any], where: str, errors: List[str]) -> None:
    meta = doc.get("metadata") or {}
    name = meta.get("name", "")
    if not isinstance(name, str) or not DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        errors.append(f"{where}.metadata.name: {name!r} is not a DNS-1123 subdomain")
    ns = meta.get("namespace")
    if ns is not None and (not isinstance(ns, str) or not DNS1123_LABEL.match(ns)):
        errors.append(f"{where}.metadata.namespace: {ns!r} is not a DNS-1123 label")


def selector_matches(selector: Dict[str, Any], labels: Dict[str, str]) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def check_pod_spec(spec: Dict[str, Any], where: str, errors: List[str]) -> None:
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for kind in ("initContainers", "containers"):
        seen = set()
        for i, c in enumerate(spec.get(kind) or []):
            cw = f"{where}.{kind}[{i}]"
            name = c.get("name", "")
            if not DNS1123_LABEL.match(name):
                errors.append(f"{cw}.name: {name!r} is not a DNS-1123 label")
            if name in seen:
                errors.append(f"{cw}.name: {name!r} appears twice")
            seen.add(name)
            ports = {}
            for j, p in enumerate(c.get("ports") or []):
                if "name" in p:
                    if not IANA_SVC_NAME.match(p["name"]):
                        errors.append(f"{cw}.ports[{j}].name: {p['name']!r} is not an IANA service name")
                    ports[p["name"]] = p.get("containerPort")
                cp = p.get("containerPort")
                if isinstance(cp, int) and not 1 <= cp <= 65535:
                    errors.append(f"{cw}.ports[{j}].containerPort: {cp} is out of range")
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                pr = c.get(probe) or {}
                for handler in ("httpGet", "tcpSocket", "grpc"):
                    port = (pr.get(handler) or {}).get("port")
                    if isinstance(port, str) and port not in ports:
                        errors.append(f"{cw}.{probe}.{handler}.port: {port!r} names no port of this container")
                handlers = [h for h in ("exec", "httpGet", "tcpSocket", "grpc") if h in pr]
                if pr and len(handlers) != 1:
                    errors.append(f"{cw}.{probe}: exactly one handler (exec, httpGet, tcpSocket, grpc)")
            for j, m in enumerate(c.get("volumeMounts") or []):
                if m.get("name") not in volumes:
                    errors.append(f"{cw}.volumeMounts[{j}].name: {m.get('name')!r} is not a volume of the pod")
            for j, e in enumerate(c.get("env") or []):
                if not ENV_NAME.match(e.get("name", "")):
                    errors.append(f"{cw}.env[{j}].name: {e.get('name')!r} is not a valid variable name")
            sc = c.get("securityContext") or {}
            adds = set((sc.get("capabilities") or {}).get("add") or [])
            if sc.get("allowPrivilegeEscalation") is False and (
                    sc.get("privileged") or "SYS_ADMIN" in adds or "CAP_SYS_ADMIN" in adds):
                errors.append(f"{cw}.securityContext: allowPrivilegeEscalation cannot be false with "
                              "privileged or CAP_SYS_ADMIN")


def container_ports(pod_spec: Dict[str, Any]) -> Dict[str, int]:
    out = {}
    for c in pod_spec.get("containers") or []:
        for p in c.get("ports") or []:
            if "name" in p:
                out[p["name"]] = p.get("containerPort")
    return out


def check_set(docs: List[Tuple[str, Dict[str, Any]]]) -> List[str]:
    """Validates every document, then what one document says of another."""
    errors: List[str] = []
    pods: List[Tuple[str, Dict[str, Any], Dict[str, Any]]] = []  # (where, labels, pod spec)
    configmaps = set()
    namespaces = set()
    for where, doc in docs:
        if not isinstance(doc, dict):
            errors.append(f"{where}: not an object")
            continue
        key = (doc.get("apiVersion"), doc.get("kind"))
        cls_name = KINDS.get(key)
        if cls_name is None:
            errors.append(f"{where}: {key[0]}/{key[1]} is not a kind this check knows")
            continue
        check_object(doc, getattr(models, cls_name), where, errors)
        check_metadata(doc, where, errors)
        ns = (doc.get("metadata") or {}).get("namespace")
        if key == ("v1", "Namespace"):
            namespaces.add(_name(doc))
        elif ns is None:
            errors.append(f"{where}.metadata.namespace: every object of the set names its namespace")
        if key == ("v1", "ConfigMap"):
            configmaps.add(_name(doc))
        if key[1] in ("Deployment", "DaemonSet"):
            spec = doc.get("spec") or {}
            tmpl = spec.get("template") or {}
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            if not selector_matches(spec.get("selector") or {}, labels):
                errors.append(f"{where}.spec.selector: does not match the pod template's labels")
            check_pod_spec(tmpl.get("spec") or {}, f"{where}.spec.template.spec", errors)
            pods.append((where, labels, tmpl.get("spec") or {}))
    for where, doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        ns = (doc.get("metadata") or {}).get("namespace")
        if ns is not None and namespaces and ns not in namespaces:
            errors.append(f"{where}.metadata.namespace: {ns!r} is not created by the set")
        spec = doc.get("spec") or {}
        if kind == "Service":
            matched = [p for p in pods if selector_matches({"matchLabels": spec.get("selector") or {}}, p[1])]
            if not matched:
                errors.append(f"{where}.spec.selector: matches no pod template of the set")
            for i, port in enumerate(spec.get("ports") or []):
                tp = port.get("targetPort")
                if isinstance(tp, str) and not all(tp in container_ports(p[2]) for p in matched):
                    errors.append(f"{where}.spec.ports[{i}].targetPort: {tp!r} names no container port")
        if kind == "PodDisruptionBudget":
            if not any(selector_matches(spec.get("selector") or {}, p[1]) for p in pods):
                errors.append(f"{where}.spec.selector: matches no pod template of the set")
            if ("minAvailable" in spec) == ("maxUnavailable" in spec):
                errors.append(f"{where}.spec: exactly one of minAvailable and maxUnavailable")
        if kind == "HorizontalPodAutoscaler":
            ref = spec.get("scaleTargetRef") or {}
            if not any(d.get("kind") == ref.get("kind") and _name(d) == ref.get("name") for _, d in docs
                       if isinstance(d, dict)):
                errors.append(f"{where}.spec.scaleTargetRef: names no object of the set")
        if kind in ("Deployment", "DaemonSet"):
            tspec = (spec.get("template") or {}).get("spec") or {}
            for c in tspec.get("containers") or []:
                for ef in c.get("envFrom") or []:
                    ref = (ef.get("configMapRef") or {}).get("name")
                    if ref and ref not in configmaps:
                        errors.append(f"{where}: envFrom names ConfigMap {ref!r}, which the set does not have")
            for v in tspec.get("volumes") or []:
                ref = (v.get("configMap") or {}).get("name")
                if ref and ref not in configmaps:
                    errors.append(f"{where}: volume {v.get('name')!r} names ConfigMap {ref!r}, which the set "
                                  "does not have")
    return errors


def find(docs: List[Tuple[str, Dict[str, Any]]], kind: str, name: Optional[str] = None) -> Dict[str, Any]:
    for _, d in docs:
        if isinstance(d, dict) and d.get("kind") == kind and (name is None or _name(d) == name):
            return d
    raise KeyError(f"no {kind} {name or ''} in the set")
