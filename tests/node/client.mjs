// A Node.js client of the ragmesh services, written from proto/ and proto/README.md ("Calling a service") only:
// it loads the .proto files with @grpc/proto-loader, mints the internal identity token itself (Ed25519 JWS with
// node:crypto) with a per-caller key, and calls the embedder and the retriever.
//
//   node client.mjs < config.json
//
// config: {"proto": "<repo>/proto", "embedder": "host:port", "retriever": "host:port", "answerer": "host:port",
//          "caller": "example-client", "private_key": "<PEM>", "user": {"sub", "department", "roles"},
//          "query": "..."}
// Prints one JSON object: what each call returned, or its gRPC status when it was refused.

import { createHash, createPrivateKey, createPublicKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const config = JSON.parse(readFileSync(0, "utf8"));

// ---------- the internal identity token (proto/README.md) ----------
const b64url = (bytes) => Buffer.from(bytes).toString("base64url");

function keyId(privateKey) {
  // kid = base64url(sha256(raw 32-byte Ed25519 public key)[0:12]), no padding
  const spki = createPublicKey(privateKey).export({ format: "der", type: "spki" });
  return b64url(createHash("sha256").update(spki.subarray(spki.length - 32)).digest().subarray(0, 12));
}

function mint(audiences, { ttl = 120 } = {}) {
  const key = createPrivateKey(config.private_key);
  const now = Math.floor(Date.now() / 1000);
  const header = { alg: "EdDSA", typ: "JWT", kid: keyId(key) };
  const claims = {
    sub: config.user.sub,
    department: config.user.department,
    roles: config.user.roles,
    iat: now,
    exp: now + ttl,
    aud: audiences,
    iss: config.caller,
    act: { sub: config.caller },
  };
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  return `${input}.${b64url(sign(null, Buffer.from(input), key))}`;
}

// ---------- the stubs, from proto/ ----------
function service(file, pkg, name, address) {
  const definition = protoLoader.loadSync(file, {
    includeDirs: [config.proto],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
  });
  const Client = pkg.split(".").reduce((o, part) => o[part], grpc.loadPackageDefinition(definition))[name];
  return new Client(address, grpc.credentials.createInsecure());
}

function call(client, method, request, token) {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("x-rag-identity", token);
  return new Promise((resolve) => {
    client[method](request, metadata, { deadline: Date.now() + 60_000 }, (error, reply) => {
      if (error) resolve({ code: grpc.status[error.code], details: error.details });
      else resolve({ reply });
    });
  });
}

const embedder = service("ragmesh/embedder/v1/embedder.proto", "ragmesh.embedder.v1", "EmbedderService", config.embedder);
const retriever = service("ragmesh/retriever/v1/retriever.proto", "ragmesh.retriever.v1", "RetrieverService", config.retriever);
const answerer = service("ragmesh/answerer/v1/answerer.proto", "ragmesh.answerer.v1", "AnswererService", config.answerer);

const both = mint(["ragmesh-retriever", "ragmesh-embedder"]);
const out = {};

// 1. embed the query, then search with the vector (two calls, one token naming both services)
const embedded = await call(embedder, "Embed", { texts: [config.query], is_query: true }, both);
out.embed = embedded.reply ? { dimension: embedded.reply.vectors[0].values.length } : embedded;
if (embedded.reply) {
  const found = await call(
    retriever,
    "Search",
    { query: config.query, query_vector: embedded.reply.vectors[0].values, top_k: 5 },
    both,
  );
  out.search = found.reply
    ? { document_ids: found.reply.results.map((r) => r.chunk.document_id), accessible: found.reply.accessible_documents }
    : found;
}
// 2. the retriever embeds the query itself: it forwards the token to the embedder, which the token also names
const forwarded = await call(retriever, "Search", { query: config.query, embed_query: true, top_k: 5 }, both);
out.forwarded = forwarded.reply
  ? {
      document_ids: forwarded.reply.results.map((r) => r.chunk.document_id),
      vector_unavailable: forwarded.reply.vector_unavailable,
    }
  : forwarded;
// 3. refusals: no token; a token for the retriever only, shown to the embedder; a token for a service the
//    caller's key is not registered for; an expired token
out.refused = {
  no_token: await call(embedder, "Embed", { texts: ["x"] }, null),
  other_audience: await call(embedder, "Embed", { texts: ["x"] }, mint(["ragmesh-retriever"])),
  not_allowed: await call(answerer, "CheckInput", { question: "hello" }, mint(["ragmesh-answerer"])),
  expired: await call(embedder, "Embed", { texts: ["x"] }, mint(["ragmesh-embedder"], { ttl: -60 })),
};
for (const client of [embedder, retriever, answerer]) client.close();
console.log(JSON.stringify(out));
