/**
 * Service addresses: the forms `HEXR_SANDBOX_URL` and `new Client({ url })` accept,
 * parsed exactly as the Python SDK parses them.
 *
 * @module
 */

/** Where the sandbox service listens. */
export interface Address {
  /** The address as given (for messages). */
  readonly url: string;
  /** `http`, `https`, or `unix` (HTTP over a unix socket). */
  readonly scheme: "http" | "https" | "unix";
  /** Host name or IP (without brackets) for TCP; `localhost` for unix sockets. */
  readonly host: string;
  /** TCP port (0 for unix sockets). */
  readonly port: number;
  /** Filesystem path of the unix socket, or `""`. */
  readonly socketPath: string;
  /** Path prefix put before every API path (`""`, or e.g. `/sandbox` behind a proxy). */
  readonly basePath: string;
}

// Control characters are refused everywhere, spaces wherever the text reaches a
// request line or a Host header (anything but a unix: socket path).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

function invalid(url: string, why: string): TypeError {
  return new TypeError(`sandbox URL ${JSON.stringify(url)} ${why}`);
}

/**
 * Parses a sandbox service address.
 *
 * Accepted forms:
 * - `http://host:port` (port defaults to 80), optionally with a path prefix;
 * - `https://host:port` (TLS; see the `caFile`, `certFile`, `keyFile` options);
 * - `unix:/path/to.sock` (also `unix:///path/to.sock`): HTTP over a unix socket;
 * - `http+unix://%2Fpath%2Fto.sock`: the same, percent-encoded as some clients write it;
 * - `host:port` or `:port` (as in the service's `LISTEN_ADDRESS`): taken as `http://`;
 *   an empty host means `127.0.0.1`.
 *
 * @throws TypeError when `url` is not one of these forms.
 */
export function parseUrl(url: string): Address {
  if (typeof url !== "string") {
    throw new TypeError(`sandbox URL must be a string, not ${url === null ? "null" : typeof url}`);
  }
  let text = url.trim();
  if (!text) throw new TypeError("sandbox URL is empty");
  if (CONTROL.test(text)) throw invalid(url, "contains control characters");
  if (text.startsWith("unix:")) {
    let path = text.slice("unix:".length);
    if (path.startsWith("//")) path = path.slice(2);
    if (!path) throw invalid(url, "names no socket path");
    return { url, scheme: "unix", host: "localhost", port: 0, socketPath: path, basePath: "" };
  }
  if (text.includes(" ")) throw invalid(url, "contains a space");
  if (!text.includes("://")) text = "http://" + text;

  const sep = text.indexOf("://");
  const rawScheme = text.slice(0, sep);
  const scheme = rawScheme.toLowerCase();
  const rest = text.slice(sep + 3);
  const end = rest.search(/[/?#]/);
  const netloc = end < 0 ? rest : rest.slice(0, end);
  let path = end < 0 ? "" : rest.slice(end);
  path = path.replace(/[?#].*$/s, "");
  const basePath = path.replace(/\/+$/, "");

  if (scheme === "http+unix") {
    let socketPath: string;
    try {
      socketPath = decodeURIComponent(netloc);
    } catch {
      throw invalid(url, "has an invalid percent-encoding");
    }
    if (!socketPath) throw invalid(url, "names no socket path");
    return { url, scheme: "unix", host: "localhost", port: 0, socketPath, basePath };
  }
  if (scheme !== "http" && scheme !== "https") {
    throw invalid(
      url,
      `has an unsupported scheme ${JSON.stringify(rawScheme)} ` +
        "(use http://host:port, https://host:port or unix:/path/to.sock)",
    );
  }
  if (netloc.includes("@")) throw invalid(url, "has user information, which is not supported");

  let host: string;
  let portText: string;
  if (netloc.startsWith("[")) {
    const close = netloc.indexOf("]");
    if (close < 0) throw invalid(url, "has an unclosed IPv6 address");
    host = netloc.slice(1, close);
    const after = netloc.slice(close + 1);
    if (after && !after.startsWith(":")) throw invalid(url, "has junk after its IPv6 address");
    portText = after.slice(1);
  } else {
    if (netloc.includes("]")) throw invalid(url, "has an unopened IPv6 address");
    const colon = netloc.lastIndexOf(":");
    host = colon < 0 ? netloc : netloc.slice(0, colon);
    portText = colon < 0 ? "" : netloc.slice(colon + 1);
  }
  let port: number;
  if (portText === "") {
    port = scheme === "https" ? 443 : 80;
  } else {
    if (!/^[0-9]+$/.test(portText)) throw invalid(url, "has an invalid port");
    port = Number(portText);
    if (port > 65535) throw invalid(url, "has an invalid port");
  }
  return {
    url,
    scheme,
    host: host.toLowerCase() || "127.0.0.1",
    port,
    socketPath: "",
    basePath,
  };
}

/** The value of the HTTP `Host` header for `address`. */
export function hostHeader(address: Address): string {
  if (address.scheme === "unix") return "localhost";
  const host = address.host.includes(":") ? `[${address.host}]` : address.host;
  const defaultPort = address.scheme === "https" ? 443 : 80;
  return address.port === defaultPort ? host : `${host}:${address.port}`;
}
