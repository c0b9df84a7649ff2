{{/*
Helpers shared by every object. Most take the component context built in component.yaml:
  dict "root" $ "name" <component name> "c" <component values merged over .Values.default>
*/}}

{{- define "ragmesh.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-<component>: the Deployment, Service and ServiceAccount name, and the DNS name in *_ADDR. */}}
{{- define "ragmesh.componentName" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ragmesh.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "ragmesh.labels" -}}
helm.sh/chart: {{ include "ragmesh.chart" .root }}
{{ include "ragmesh.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: ragmesh
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* Environment prefix of a component: the worker shares the gateway's GATEWAY_* settings (GATEWAY_GRAPH_ENABLED). */}}
{{- define "ragmesh.envPrefix" -}}
{{- if eq .name "worker" -}}GATEWAY{{- else -}}{{ upper .name }}{{- end -}}
{{- end -}}

{{/* The OpenTelemetry service name: the one each process passes to setup_telemetry. */}}
{{- define "ragmesh.serviceName" -}}
{{- if eq .name "worker" -}}ingest-worker{{- else -}}{{ .name }}{{- end -}}
{{- end -}}

{{/* "true" when this component is scheduled on GPUs, "" otherwise. */}}
{{- define "ragmesh.gpuOn" -}}
{{- if and .root.Values.gpu.enabled (gt (int .c.gpu) 0) -}}true{{- end -}}
{{- end -}}

{{- define "ragmesh.image" -}}
{{- $g := .root.Values.global.image -}}
{{- $tag := .c.image.tag | default $g.tag | default .root.Chart.AppVersion -}}
{{- if and (include "ragmesh.gpuOn" .) (not .c.image.tag) -}}
{{- $tag = printf "%s%s" $tag .root.Values.gpu.imageTagSuffix -}}
{{- end -}}
{{- if $g.registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $g.registry) .c.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .c.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "ragmesh.serviceAccountName" -}}
{{- if .c.serviceAccount.create -}}
{{- .c.serviceAccount.name | default (include "ragmesh.componentName" .) -}}
{{- else -}}
{{- .c.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* Where the gateway and the worker mount the CA certificate of a TLS Redis (stores.redis.tls.caSecret). */}}
{{- define "ragmesh.redisCaDir" -}}/etc/ragmesh/redis-ca{{- end -}}

{{/* "true" when this component talks to Redis and verifies it against a CA from a Secret. */}}
{{- define "ragmesh.redisCaOn" -}}
{{- $tls := .root.Values.stores.redis.tls -}}
{{- if and (has .name (list "gateway" "worker" "beat")) $tls.enabled $tls.caSecret.name -}}true{{- end -}}
{{- end -}}

{{- define "ragmesh.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .key }}
{{- end -}}

{{/*
Environment the chart wires automatically (YAML list). Entries a component sets itself in `env`
win: ragmesh.env drops wired entries of the same name.
*/}}
{{- define "ragmesh.wiredEnv" -}}
{{- $v := .root.Values -}}
{{- $prefix := include "ragmesh.envPrefix" . -}}
{{- if .c.port }}
- name: {{ $prefix }}_HOST
  value: "0.0.0.0"
- name: {{ $prefix }}_PORT
  value: {{ .c.port | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ include "ragmesh.serviceName" . | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "service.namespace=%s,service.version=%s" .root.Release.Name .root.Chart.AppVersion | quote }}
{{- with $v.global.otelCollectorEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- if $v.observability.tracesToPostgres }}
{{ include "ragmesh.secretEnv" (dict "env" "RAG_TRACES_DSN" "name" $v.stores.postgres.tracesDsnSecret.name "key" $v.stores.postgres.tracesDsnSecret.key) }}
{{- end }}
{{- if $v.mtls.enabled }}
- name: RAGMESH_TLS_CERT
  value: {{ printf "%s/tls.crt" $v.mtls.mountPath | quote }}
- name: RAGMESH_TLS_KEY
  value: {{ printf "%s/tls.key" $v.mtls.mountPath | quote }}
- name: RAGMESH_TLS_CA
  value: {{ printf "%s/ca.crt" $v.mtls.mountPath | quote }}
{{- if eq .c.protocol "grpc" }}
- name: RAGMESH_HEALTH_PORT
  value: {{ $v.mtls.healthPort | quote }}
{{- end }}
{{- end }}
- name: LOG_LEVEL
  value: {{ $v.global.logLevel | quote }}
- name: RAGMESH_LOG_FORMAT
  value: {{ $v.global.logFormat | quote }}
{{- with $v.global.otelCollectorEndpoint }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $v.global.otelProtocol | quote }}
{{- end }}
{{- if include "ragmesh.metricsPortOn" . }}
- name: RAGMESH_METRICS_PORT
  value: {{ $v.metrics.port | quote }}
{{- if eq .c.protocol "none" }}
- name: RAGMESH_METRICS_HOST
  value: "0.0.0.0"
{{- end }}
{{- end }}
{{- $identity := $v.internalIdentity.secret }}
{{- if has .name (list "gateway" "worker") }}
{{ include "ragmesh.secretEnv" (dict "env" "RAGMESH_INTERNAL_SIGNING_KEY" "name" $identity.name "key" $identity.signingKeyKey) }}
- name: RAGMESH_INTERNAL_TOKEN_TTL_SECONDS
  value: {{ $v.internalIdentity.tokenTtlSeconds | quote }}
{{- if eq .name "worker" }}
{{ include "ragmesh.secretEnv" (dict "env" "RAGMESH_INTERNAL_PUBLIC_KEY" "name" $identity.name "key" $identity.publicKeyKey) }}
{{- end }}
{{- else if eq .c.protocol "grpc" }}
{{ include "ragmesh.secretEnv" (dict "env" "RAGMESH_INTERNAL_PUBLIC_KEY" "name" $identity.name "key" $identity.publicKeyKey) }}
{{- with $v.internalIdentity.callerKeys }}
- name: RAGMESH_INTERNAL_CALLER_KEYS
  value: {{ include "ragmesh.callerKeys" . | quote }}
{{- end }}
{{- end }}
- name: HF_HUB_OFFLINE
  value: "1"
- name: TRANSFORMERS_OFFLINE
  value: "1"
{{- if include "ragmesh.gpuOn" . }}
- name: {{ $prefix }}_DEVICE
  value: cuda
{{- end }}
{{- if eq .name "retriever" }}
{{- $emb := $v.components.embedder }}
{{- if and $emb (ne (toString (get $emb "enabled")) "false") }}
- name: EMBEDDER_ADDR
  value: {{ printf "%s-embedder:%v" $.root.Release.Name (get $emb "port") | quote }}
{{- end }}
{{- end }}
{{- if has .name (list "gateway" "worker") }}
{{- range $svc := list "parser" "embedder" "retriever" "reranker" "graph" "answerer" }}
{{- $dep := get $v.components $svc }}
{{- if and $dep (ne (toString (get $dep "enabled")) "false") }}
- name: {{ upper $svc }}_ADDR
  value: {{ printf "%s-%s:%v" $.root.Release.Name $svc (get $dep "port") | quote }}
{{- end }}
{{- end }}
{{- $redis := $v.stores.redis }}
{{- if and $redis.tls.enabled (not (hasPrefix "rediss://" $redis.url)) }}
{{- fail "stores.redis.tls.enabled needs a rediss:// stores.redis.url" }}
{{- end }}
{{- if and (hasPrefix "rediss://" $redis.url) (not $redis.tls.enabled) }}
{{- fail "stores.redis.url is rediss://: set stores.redis.tls.enabled=true" }}
{{- end }}
- name: REDIS_URL
  value: {{ $redis.url | quote }}
{{- if $redis.passwordSecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "REDIS_PASSWORD" "name" $redis.passwordSecret.name "key" $redis.passwordSecret.key) }}
{{- end }}
{{- if and $redis.tls.enabled $redis.tls.caSecret.name }}
- name: REDIS_TLS_CA_FILE
  value: {{ printf "%s/%s" (include "ragmesh.redisCaDir" .) $redis.tls.caSecret.key | quote }}
{{- end }}
- name: GATEWAY_UPLOAD_DIR
  value: {{ $v.uploads.mountPath | quote }}
- name: GATEWAY_GRAPH_ENABLED
  value: {{ ne (toString $v.components.graph.enabled) "false" | quote }}
{{ include "ragmesh.secretEnv" (dict "env" "CONNECTORS_DSN" "name" $v.stores.postgres.connectorsDsnSecret.name "key" $v.stores.postgres.connectorsDsnSecret.key) }}
- name: CONNECTORS_ALLOWED_ROOTS
  value: {{ join "," $v.connectors.allowedRoots | quote }}
{{- end }}
{{- if eq .name "beat" }}
{{- $redis := $v.stores.redis }}
- name: REDIS_URL
  value: {{ $redis.url | quote }}
{{- if $redis.passwordSecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "REDIS_PASSWORD" "name" $redis.passwordSecret.name "key" $redis.passwordSecret.key) }}
{{- end }}
{{- if and $redis.tls.enabled $redis.tls.caSecret.name }}
- name: REDIS_TLS_CA_FILE
  value: {{ printf "%s/%s" (include "ragmesh.redisCaDir" .) $redis.tls.caSecret.key | quote }}
{{- end }}
- name: CONNECTORS_TICK_SECONDS
  value: {{ $v.connectors.tickSeconds | quote }}
{{- end }}
{{- if eq .name "gateway" }}
{{- if not (or $v.auth.jwtSecret.name (and $v.auth.jwtIssuer $v.auth.jwksUrl)) }}
{{- fail "auth: set auth.jwtIssuer and auth.jwksUrl (production) or auth.jwtSecret.name (development)" }}
{{- end }}
{{- with $v.auth.jwtIssuer }}
- name: GATEWAY_JWT_ISSUER
  value: {{ . | quote }}
{{- end }}
{{- with $v.auth.jwksUrl }}
- name: GATEWAY_JWKS_URL
  value: {{ . | quote }}
{{- end }}
{{- with $v.auth.jwtAudience }}
- name: GATEWAY_JWT_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- if and (eq .name "gateway") $v.observability.tracesToPostgres }}
{{ include "ragmesh.secretEnv" (dict "env" "GATEWAY_TRACES_DSN" "name" $v.stores.postgres.dsnSecret.name "key" $v.stores.postgres.dsnSecret.key) }}
{{ include "ragmesh.secretEnv" (dict "env" "GATEWAY_TRACES_RLS_KEY" "name" $v.stores.postgres.rlsKeySecret.name "key" $v.stores.postgres.rlsKeySecret.key) }}
{{ include "ragmesh.secretEnv" (dict "env" "GATEWAY_TRACES_RETENTION_DSN" "name" $v.stores.postgres.retentionDsnSecret.name "key" $v.stores.postgres.retentionDsnSecret.key) }}
{{- end }}
{{- if $v.auth.jwtSecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "GATEWAY_JWT_SECRET" "name" $v.auth.jwtSecret.name "key" $v.auth.jwtSecret.key) }}
{{- end }}
{{- with $v.auth.sessionKeySecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "GATEWAY_SESSION_KEY" "name" . "key" $v.auth.sessionKeySecret.key) }}
{{- end }}
{{- with $v.auth.oidc.clientId }}
- name: GATEWAY_OIDC_CLIENT_ID
  value: {{ . | quote }}
{{- end }}
{{- with $v.auth.oidc.clientSecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "GATEWAY_OIDC_CLIENT_SECRET" "name" . "key" $v.auth.oidc.clientSecret.key) }}
{{- end }}
{{- with $v.cors.origins }}
- name: GATEWAY_CORS_ORIGINS
  value: {{ join "," . | quote }}
- name: GATEWAY_CORS_METHODS
  value: {{ join "," $v.cors.methods | quote }}
- name: GATEWAY_CORS_HEADERS
  value: {{ join "," $v.cors.headers | quote }}
{{- end }}
{{- end }}
{{- if eq .name "retriever" }}
{{ include "ragmesh.secretEnv" (dict "env" "RETRIEVER_DATABASE_URL" "name" $v.stores.postgres.dsnSecret.name "key" $v.stores.postgres.dsnSecret.key) }}
{{ include "ragmesh.secretEnv" (dict "env" "RETRIEVER_RLS_KEY" "name" $v.stores.postgres.rlsKeySecret.name "key" $v.stores.postgres.rlsKeySecret.key) }}
- name: RETRIEVER_BACKEND
  value: {{ $v.retriever.backend | quote }}
{{- if eq $v.retriever.backend "weaviate" }}
- name: WEAVIATE_URL
  value: {{ required "stores.weaviate.url is required when retriever.backend=weaviate" $v.stores.weaviate.url | quote }}
- name: WEAVIATE_GRPC_PORT
  value: {{ $v.stores.weaviate.grpcPort | quote }}
{{- if $v.stores.weaviate.apiKeySecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "WEAVIATE_API_KEY" "name" $v.stores.weaviate.apiKeySecret.name "key" $v.stores.weaviate.apiKeySecret.key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .name "graph" }}
- name: RETRIEVER_ADDR
  value: {{ printf "%s-retriever:%v" $.root.Release.Name $v.components.retriever.port | quote }}
- name: NEO4J_URI
  value: {{ required "stores.neo4j.uri is required (the graph service's NEO4J_URI)" $v.stores.neo4j.uri | quote }}
- name: NEO4J_DATABASE
  value: {{ $v.stores.neo4j.database | quote }}
{{ include "ragmesh.secretEnv" (dict "env" "NEO4J_USER" "name" $v.stores.neo4j.authSecret.name "key" $v.stores.neo4j.authSecret.usernameKey) }}
{{ include "ragmesh.secretEnv" (dict "env" "NEO4J_PASSWORD" "name" $v.stores.neo4j.authSecret.name "key" $v.stores.neo4j.authSecret.passwordKey) }}
{{- end }}
{{- if eq .name "answerer" }}
{{- /* the bundled model server (modelServer.enabled) is the answerer's OpenAI-compatible backend unless
stores.openai.baseUrl names another server */}}
{{- $bundled := and $v.modelServer.enabled (not $v.stores.openai.baseUrl) }}
- name: ANSWERER_LLM_BACKEND
  value: {{ ternary "openai" $v.stores.llm.backend $bundled | quote }}
{{- if $bundled }}
- name: ANSWERER_OPENAI_BASE_URL
  value: {{ printf "http://%s:%v/v1" (include "ragmesh.componentName" (dict "root" $.root "name" "model-server")) $v.modelServer.port | quote }}
- name: ANSWERER_MODEL
  value: {{ $v.modelServer.modelAlias | quote }}
{{- else if eq $v.stores.llm.backend "openai" }}
- name: ANSWERER_OPENAI_BASE_URL
  value: {{ required "stores.openai.baseUrl is required with stores.llm.backend openai (the answerer's ANSWERER_OPENAI_BASE_URL)" $v.stores.openai.baseUrl | quote }}
- name: ANSWERER_MODEL
  value: {{ required "stores.openai.model is required with stores.llm.backend openai" $v.stores.openai.model | quote }}
{{- if $v.stores.openai.apiKeySecret.name }}
{{ include "ragmesh.secretEnv" (dict "env" "ANSWERER_OPENAI_API_KEY" "name" $v.stores.openai.apiKeySecret.name "key" $v.stores.openai.apiKeySecret.key) }}
{{- end }}
{{- else }}
- name: OLLAMA_HOST
  value: {{ required "stores.ollama.host is required (the answerer's OLLAMA_HOST)" $v.stores.ollama.host | quote }}
- name: ANSWERER_MODEL
  value: {{ $v.stores.ollama.model | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Wired env minus names the component overrides, then the component's own env. */}}
{{/*
The stores a component reaches (a JSON list): what its egress policy admits besides DNS and the services it
calls. The secrets it holds are wired above (ragmesh.wiredEnv), each only into the component that uses it.
*/}}
{{- define "ragmesh.storesOf" -}}
{{- $v := .root.Values -}}
{{- $stores := list -}}
{{- if eq .name "retriever" -}}
{{- $stores = append $stores "postgres" -}}
{{- if eq $v.retriever.backend "weaviate" }}{{ $stores = append $stores "weaviate" }}{{ end -}}
{{- end -}}
{{- if has .name (list "gateway" "worker" "beat") }}{{ $stores = append $stores "redis" }}{{ end -}}
{{- if has .name (list "gateway" "worker") }}{{ $stores = append $stores "postgres" }}{{ end -}}
{{- if eq .name "graph" }}{{ $stores = append $stores "neo4j" }}{{ end -}}
{{- if and (eq .name "answerer") (not (and $v.modelServer.enabled (not $v.stores.openai.baseUrl))) }}{{ $stores = append $stores (ternary "openai" "ollama" (eq $v.stores.llm.backend "openai")) }}{{ end -}}
{{- if and (eq .name "gateway") $v.auth.jwksUrl }}{{ $stores = append $stores "identityProvider" }}{{ end -}}
{{- if $v.observability.tracesToPostgres }}{{ $stores = append $stores "postgres" }}{{ end -}}
{{- if $v.global.otelCollectorEndpoint }}{{ $stores = append $stores "otelCollector" }}{{ end -}}
{{- toJson (uniq $stores) -}}
{{- end -}}

{{/* The ragmesh services a component calls (a JSON list): those whose networkPolicy.allowFrom names it. */}}
{{- define "ragmesh.calls" -}}
{{- $root := .root -}}
{{- $me := .name -}}
{{- $calls := list -}}
{{- range $name, $component := $root.Values.components -}}
{{- $c := mergeOverwrite (deepCopy $root.Values.default) $component -}}
{{- if and $c.enabled $c.port (ne $name $me) (has $me $c.networkPolicy.allowFrom) -}}
{{- $calls = append $calls $name -}}
{{- end -}}
{{- end -}}
{{- toJson $calls -}}
{{- end -}}

{{/* The Secret holding a component's certificate (mTLS): its cert-manager Certificate's, or the shared one. */}}
{{- define "ragmesh.tlsSecretName" -}}
{{- if .root.Values.mtls.certManager.enabled -}}
{{- printf "%s-tls" (include "ragmesh.componentName" .) -}}
{{- else -}}
{{- required "mtls.secret.name (an existing Secret with tls.crt, tls.key, ca.crt) or mtls.certManager.enabled is required when mtls.enabled" .root.Values.mtls.secret.name -}}
{{- end -}}
{{- end -}}

{{- define "ragmesh.env" -}}
{{- $own := list -}}
{{- range .c.env }}{{ $own = append $own .name }}{{ end -}}
{{- $out := list -}}
{{- range (include "ragmesh.wiredEnv" . | fromYamlArray) }}
{{- if not (has .name $own) }}{{ $out = append $out . }}{{ end }}
{{- end -}}
{{- toYaml (concat $out .c.env) -}}
{{- end -}}

{{/* RAGMESH_INTERNAL_CALLER_KEYS: internalIdentity.callerKeys as the JSON list the services read. */}}
{{- define "ragmesh.callerKeys" -}}
{{- $entries := list -}}
{{- range . -}}
{{- $entries = append $entries (dict "caller" .caller "public_key" .publicKey "audiences" .audiences) -}}
{{- end -}}
{{- toJson $entries -}}
{{- end -}}

{{/* "true" when the component serves /metrics on a port of its own (gRPC services and the worker; the gateway
serves it on its HTTP port). */}}
{{- define "ragmesh.metricsPortOn" -}}
{{- if and .root.Values.metrics.enabled (ne .c.protocol "http") -}}true{{- end -}}
{{- end -}}
