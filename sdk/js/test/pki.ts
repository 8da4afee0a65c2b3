/**
 * A test PKI made with Debian's `openssl` command in a temporary directory: a CA, a
 * server certificate for 127.0.0.1 and client certificates with SPIFFE URI SANs.
 * Nothing here touches the network.
 */

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const OPENSSL = "/usr/bin/openssl";

export class Pki {
  readonly dir = mkdtempSync(join(tmpdir(), "hxs-js-pki-"));

  path(name: string, ext: "pem" | "key"): string {
    return join(this.dir, `${name}.${ext}`);
  }

  #run(args: string[]): void {
    const r = spawnSync(OPENSSL, args, { cwd: this.dir, encoding: "utf8", timeout: 60_000 });
    if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr || r.error}`);
  }

  #key(name: string): void {
    this.#run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${name}.key`]);
  }

  ca(name: string): void {
    this.#key(name);
    this.#run(["req", "-x509", "-new", "-key", `${name}.key`, "-out", `${name}.pem`, "-days", "2",
      "-subj", `/CN=${name}`,
      "-addext", "basicConstraints=critical,CA:TRUE",
      "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
  }

  /** A certificate signed by `ca`, with the given URI and IP SANs. */
  leaf(name: string, ca: string, sans: { uris?: string[]; ips?: string[] }, usage: "clientAuth" | "serverAuth"): void {
    this.#key(name);
    const alt = [...(sans.uris ?? []).map((u) => `URI:${u}`), ...(sans.ips ?? []).map((i) => `IP:${i}`)];
    const ext = [
      "basicConstraints=critical,CA:FALSE",
      "keyUsage=critical,digitalSignature,keyEncipherment",
      `extendedKeyUsage=${usage}`,
      ...(alt.length ? [`subjectAltName=${alt.join(",")}`] : []),
    ];
    writeFileSync(join(this.dir, `${name}.ext`), ext.join("\n") + "\n");
    this.#run(["req", "-new", "-key", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`]);
    this.#run(["x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.pem`, "-CAkey", `${ca}.key`,
      "-CAcreateserial", "-days", "1", "-out", `${name}.pem`, "-extfile", `${name}.ext`]);
  }

  /** `name`'s certificate and key in one PEM file; returns its path. */
  combined(name: string): string {
    const out = join(this.dir, `${name}-combined.pem`);
    writeFileSync(out, readFileSync(this.path(name, "pem"), "utf8") + readFileSync(this.path(name, "key"), "utf8"));
    return out;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
