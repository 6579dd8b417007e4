"""The bodies of HTTP inference requests and responses of the Ray Serve deployment
(stagecraft.ray_serve): KServe v2 JSON, .npy and .npz, decoded and checked into float32 arrays,
with one-line errors (RequestError) for what a client got wrong."""
from __future__ import annotations

import io
import json
from typing import Any, Dict, Sequence

import numpy as np


class RequestError(ValueError):
    """A request the caller got wrong (HTTP 400); the message is one line."""


def _one_line(e: BaseException) -> str:
    cause = getattr(e, "cause", None)  # a RayTaskError carries the replica's exception
    if isinstance(cause, BaseException):
        e = cause
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    text = " ".join(text.split())
    return text or type(e).__name__



# ---- Request bodies ----------------------------------------------------------------------------

def decode_kserve_json(body: bytes) -> Dict[str, np.ndarray]:
    """KServe v2 JSON inference request -> float32 arrays by input name (RequestError if bad)."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(f"body: not valid JSON ({e})") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list) \
            or not request["inputs"]:
        raise RequestError("body: expected a KServe v2 request {\"inputs\": [{\"name\", \"shape\", "
                           "\"datatype\", \"data\"}, ...]}")
    arrays = {}
    for i, t in enumerate(request["inputs"]):
        if not isinstance(t, dict) or not {"name", "shape", "datatype", "data"} <= t.keys():
            raise RequestError(f"inputs[{i}]: expected the keys name, shape, datatype, data")
        name, shape, dtype = t["name"], t["shape"], t["datatype"]
        if not isinstance(name, str):
            raise RequestError(f"inputs[{i}]: name must be a string")
        if dtype != "FP32":
            raise RequestError(f"input '{name}': datatype {dtype}, expected FP32")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise RequestError(f"input '{name}': shape must be a list of sizes >= 0")
        try:
            data = np.asarray(t["data"], dtype=np.float32).reshape(-1)
        except (ValueError, TypeError) as e:
            raise RequestError(f"input '{name}': data is not a list of numbers ({e})") from None
        if data.size != int(np.prod(shape, dtype=np.int64)):
            raise RequestError(f"input '{name}': {data.size} values for shape "
                               f"{'x'.join(map(str, shape))} ({int(np.prod(shape))})")
        arrays[name] = data.reshape(shape)
    return arrays


def encode_kserve_json(model: str, names: Sequence[str], outputs: Sequence[np.ndarray]) -> bytes:
    return json.dumps({"model_name": model, "outputs": [
        {"name": n, "shape": list(y.shape), "datatype": "FP32", "data": y.reshape(-1).tolist()}
        for n, y in zip(names, outputs)]}).encode()


def decode_npy(body: bytes) -> np.ndarray:
    try:
        return np.load(io.BytesIO(body), allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - numpy raises several kinds for broken files
        raise RequestError(f"body: not a complete .npy array ({_one_line(e)})") from None


def decode_npz(body: bytes) -> Dict[str, np.ndarray]:
    try:
        with np.load(io.BytesIO(body), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001
        raise RequestError(f"body: not a complete .npz archive ({_one_line(e)})") from None


def encode_npy(y: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.save(f, y, allow_pickle=False)
    return f.getvalue()


def encode_npz(names: Sequence[str], outputs: Sequence[np.ndarray]) -> bytes:
    f = io.BytesIO()
    np.savez(f, **dict(zip(names, outputs)))
    return f.getvalue()


def _decode_body(kind: str, body: bytes) -> Any:
    """An HTTP request body of Content-Type `kind` -> what StagecraftModel.infer takes (an array,
    or a dict of them by input name); RequestError (one line) when it is wrong."""
    if kind == "application/json":
        x: Any = decode_kserve_json(body)
    elif kind in ("application/x-npy", "application/octet-stream"):
        x = decode_npy(body)
    elif kind == "application/x-npz":
        x = decode_npz(body)
    else:
        raise RequestError(f"Content-Type {kind}: expected application/json (KServe v2), "
                           f"application/x-npy or application/x-npz")
    if isinstance(x, np.ndarray) and x.dtype != np.float32:
        raise RequestError(f"body: dtype {x.dtype}, expected float32")
    return x


def _encode_body(kind: str, model: str, names: Sequence[str], outputs: Sequence[np.ndarray],
                 headers: Dict[str, str]) -> Any:
    """The HTTP response with `outputs` for a request whose body was of Content-Type `kind`."""
    from starlette.responses import Response
    if kind == "application/json":
        return Response(encode_kserve_json(model, names, outputs),
                        media_type="application/json", headers=headers)
    if kind == "application/x-npz":
        return Response(encode_npz(names, outputs), media_type="application/x-npz",
                        headers=headers)
    return Response(encode_npy(outputs[0]), media_type="application/x-npy", headers=headers)
