{{/*
The objects of one component; each takes the component context (see _helpers.tpl).
component.yaml loops over .Values.components and includes every one of these.
*/}}

{{/* Default probes by protocol: native gRPC health checks, HTTP /healthz + /readyz, or a Celery ping. */}}
{{- define "ragmesh.probes" -}}
{{- $c := .c -}}
{{- $startup := dict -}}
{{- $readiness := dict -}}
{{- $liveness := dict -}}
{{- if eq $c.protocol "grpc" -}}
{{- /* with mTLS the probes check the plaintext health-only port: kubelet cannot present a client certificate */ -}}
{{- $port := ternary .root.Values.mtls.healthPort $c.port .root.Values.mtls.enabled | int -}}
{{- $startup = dict "grpc" (dict "port" $port) "periodSeconds" 10 "timeoutSeconds" 5 "failureThreshold" 60 -}}
{{- $readiness = dict "grpc" (dict "port" $port) "periodSeconds" 5 "timeoutSeconds" 5 "failureThreshold" 3 -}}
{{- $liveness = dict "grpc" (dict "port" $port) "periodSeconds" 15 "timeoutSeconds" 5 "failureThreshold" 4 -}}
{{- else if eq $c.protocol "http" -}}
{{- $startup = dict "httpGet" (dict "path" "/healthz" "port" "http") "periodSeconds" 5 "timeoutSeconds" 5 "failureThreshold" 60 -}}
{{- $readiness = dict "httpGet" (dict "path" "/readyz" "port" "http") "periodSeconds" 5 "timeoutSeconds" 5 "failureThreshold" 3 -}}
{{- $liveness = dict "httpGet" (dict "path" "/healthz" "port" "http") "periodSeconds" 15 "timeoutSeconds" 5 "failureThreshold" 4 -}}
{{- else if eq .name "worker" -}}
{{- $liveness = dict "exec" (dict "command" (list "sh" "-c" "celery -A ragmesh_ingestion.worker inspect ping --timeout 10 -d celery@$HOSTNAME")) "initialDelaySeconds" 30 "periodSeconds" 60 "timeoutSeconds" 30 "failureThreshold" 3 -}}
{{- end -}}
{{- with ($c.startupProbe | default $startup) }}
startupProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($c.readinessProbe | default $readiness) }}
readinessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($c.livenessProbe | default $liveness) }}
livenessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "ragmesh.resources" -}}
{{- $res := deepCopy .c.resources -}}
{{- if include "ragmesh.gpuOn" . -}}
{{- $limits := get $res "limits" | default dict -}}
{{- $_ := set $limits .root.Values.gpu.resourceName (int .c.gpu) -}}
{{- $_ := set $res "limits" $limits -}}
{{- end -}}
{{- toYaml $res -}}
{{- end -}}

{{- define "ragmesh.volumeMounts" -}}
{{- $v := .root.Values -}}
- name: tmp
  mountPath: /tmp
{{- if and .c.mountModels (or $v.models.persistentVolumeClaim.claimName $v.models.hostPath.path) }}
- name: models
  mountPath: {{ $v.models.mountPath }}
  readOnly: true
{{- end }}
{{- if .c.mountUploads }}
- name: uploads
  mountPath: {{ $v.uploads.mountPath }}
{{- end }}
{{- if include "ragmesh.redisCaOn" . }}
- name: redis-ca
  mountPath: {{ include "ragmesh.redisCaDir" . }}
  readOnly: true
{{- end }}
{{- if $v.mtls.enabled }}
- name: tls
  mountPath: {{ $v.mtls.mountPath }}
  readOnly: true
{{- end }}
{{- with .c.volumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "ragmesh.volumes" -}}
{{- $v := .root.Values -}}
- name: tmp
  emptyDir: {}
{{- if .c.mountModels }}
{{- if $v.models.persistentVolumeClaim.claimName }}
- name: models
  persistentVolumeClaim:
    claimName: {{ $v.models.persistentVolumeClaim.claimName }}
    readOnly: true
{{- else if $v.models.hostPath.path }}
- name: models
  hostPath:
    path: {{ $v.models.hostPath.path }}
    type: {{ $v.models.hostPath.type }}
{{- end }}
{{- end }}
{{- if .c.mountUploads }}
- name: uploads
{{- if $v.uploads.persistentVolumeClaim.claimName }}
  persistentVolumeClaim:
    claimName: {{ $v.uploads.persistentVolumeClaim.claimName }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end }}
{{- if include "ragmesh.redisCaOn" . }}
- name: redis-ca
  secret:
    secretName: {{ .root.Values.stores.redis.tls.caSecret.name }}
    items:
      - key: {{ .root.Values.stores.redis.tls.caSecret.key }}
        path: {{ .root.Values.stores.redis.tls.caSecret.key }}
{{- end }}
{{- if $v.mtls.enabled }}
- name: tls
  secret:
    secretName: {{ include "ragmesh.tlsSecretName" . }}
    defaultMode: 288  # 0440: owner and group (fsGroup) read
{{- end }}
{{- with .c.volumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "ragmesh.deployment" -}}
{{- $c := .c -}}
{{- $gpu := include "ragmesh.gpuOn" . -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "ragmesh.componentName" . }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
spec:
  {{- if not $c.autoscaling.enabled }}
  replicas: {{ $c.replicas }}
  {{- end }}
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      {{- include "ragmesh.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "ragmesh.selectorLabels" . | nindent 8 }}
        {{- with $c.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $c.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "ragmesh.serviceAccountName" . }}
      automountServiceAccountToken: false
      {{- with .root.Values.global.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $c.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $c.terminationGracePeriodSeconds }}
      {{- $nodeSelector := $c.nodeSelector }}
      {{- $tolerations := $c.tolerations }}
      {{- if $gpu }}
      {{- $nodeSelector = merge (deepCopy .root.Values.gpu.nodeSelector) $c.nodeSelector }}
      {{- $tolerations = concat $c.tolerations .root.Values.gpu.tolerations }}
      {{- end }}
      {{- with $nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .name }}
          image: {{ include "ragmesh.image" . }}
          imagePullPolicy: {{ $c.image.pullPolicy | default .root.Values.global.image.pullPolicy }}
          {{- with $c.command }}
          command:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $c.args }}
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- $metrics := include "ragmesh.metricsPortOn" . }}
          {{- if or $c.port $metrics }}
          ports:
            {{- if $c.port }}
            - name: {{ $c.protocol }}
              containerPort: {{ $c.port }}
              protocol: TCP
            {{- if and .root.Values.mtls.enabled (eq $c.protocol "grpc") }}
            - name: health
              containerPort: {{ .root.Values.mtls.healthPort }}
              protocol: TCP
            {{- end }}
            {{- end }}
            {{- if $metrics }}
            - name: metrics
              containerPort: {{ .root.Values.metrics.port }}
              protocol: TCP
            {{- end }}
          {{- end }}
          env:
            {{- include "ragmesh.env" . | nindent 12 }}
          {{- with $c.envFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with (include "ragmesh.probes" . | trim) }}
          {{- . | nindent 10 }}
          {{- end }}
          resources:
            {{- include "ragmesh.resources" . | nindent 12 }}
          securityContext:
            {{- toYaml $c.securityContext | nindent 12 }}
          volumeMounts:
            {{- include "ragmesh.volumeMounts" . | nindent 12 }}
      volumes:
        {{- include "ragmesh.volumes" . | nindent 8 }}
{{- end -}}

{{- define "ragmesh.service" -}}
{{- $c := .c -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "ragmesh.componentName" . }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
  {{- with $c.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $c.service.type }}
  selector:
    {{- include "ragmesh.selectorLabels" . | nindent 4 }}
  ports:
    - name: {{ $c.protocol }}
      port: {{ $c.port }}
      targetPort: {{ $c.protocol }}
      protocol: TCP
      appProtocol: {{ ternary "grpc" "http" (eq $c.protocol "grpc") }}
    {{- if include "ragmesh.metricsPortOn" . }}
    - name: metrics
      port: {{ .root.Values.metrics.port }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
    {{- end }}
{{- end -}}

{{- define "ragmesh.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "ragmesh.serviceAccountName" . }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
  {{- with .c.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: false
{{- end -}}

{{- define "ragmesh.hpa" -}}
{{- $a := .c.autoscaling -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "ragmesh.componentName" . }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "ragmesh.componentName" . }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
    {{- with $a.extraMetrics }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $a.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{- define "ragmesh.pdb" -}}
{{- $p := .c.pdb -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "ragmesh.componentName" . }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $p.minAvailable) }}
  minAvailable: {{ $p.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $p.maxUnavailable | default 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "ragmesh.selectorLabels" . | nindent 6 }}
{{- end -}}

{{/*
Ingress: pods of the listed components (or anyone, with allowExternal) may reach the service port.
Egress (network.egress.enabled): DNS, the services this component calls, the stores it uses; nothing else.
*/}}
{{- define "ragmesh.networkPolicy" -}}
{{- $c := .c -}}
{{- $root := .root -}}
{{- $egress := $root.Values.network.egress -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "ragmesh.componentName" . }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "ragmesh.selectorLabels" . | nindent 6 }}
  policyTypes:
    - Ingress
    {{- if $egress.enabled }}
    - Egress
    {{- end }}
  {{- $rules := list }}
  {{- if and $c.port (or $c.networkPolicy.allowExternal $c.networkPolicy.allowFrom) }}
  {{- $rule := dict "ports" (list (dict "port" (int $c.port) "protocol" "TCP")) }}
  {{- if not $c.networkPolicy.allowExternal }}
  {{- $from := list }}
  {{- range $c.networkPolicy.allowFrom }}
  {{- $from = append $from (dict "podSelector" (dict "matchLabels" (include "ragmesh.selectorLabels" (dict "root" $root "name" .) | fromYaml))) }}
  {{- end }}
  {{- $_ := set $rule "from" $from }}
  {{- end }}
  {{- $rules = append $rules $rule }}
  {{- end }}
  {{- if include "ragmesh.metricsPortOn" . }}
  {{- /* the metrics port only, from metrics.scrapeFrom (empty: any source; the metrics hold no user data) */}}
  {{- $scrape := dict "ports" (list (dict "port" (int $root.Values.metrics.port) "protocol" "TCP")) }}
  {{- with $root.Values.metrics.scrapeFrom }}{{ $_ := set $scrape "from" . }}{{ end }}
  {{- $rules = append $rules $scrape }}
  {{- end }}
  {{- $rules = concat $rules $c.networkPolicy.extraIngress }}
  ingress:
    {{- if $rules }}
    {{- toYaml $rules | nindent 4 }}
    {{- else }} []
    {{- end }}
  {{- if $egress.enabled }}
  {{- $out := list (dict "to" $egress.dns.to "ports" $egress.dns.ports) }}
  {{- range (include "ragmesh.calls" . | fromJsonArray) }}
  {{- $callee := mergeOverwrite (deepCopy $root.Values.default) (get $root.Values.components .) }}
  {{- $peer := dict "podSelector" (dict "matchLabels" (include "ragmesh.selectorLabels" (dict "root" $root "name" .) | fromYaml)) }}
  {{- $out = append $out (dict "to" (list $peer) "ports" (list (dict "port" (int $callee.port) "protocol" "TCP"))) }}
  {{- end }}
  {{- if and (eq .name "answerer") $root.Values.modelServer.enabled }}
  {{- $server := dict "podSelector" (dict "matchLabels" (include "ragmesh.selectorLabels" (dict "root" $root "name" "model-server") | fromYaml)) }}
  {{- $out = append $out (dict "to" (list $server) "ports" (list (dict "port" (int $root.Values.modelServer.port) "protocol" "TCP"))) }}
  {{- end }}
  {{- range (include "ragmesh.storesOf" . | fromJsonArray) }}
  {{- $store := get $egress . }}
  {{- $rule := dict "ports" $store.ports }}
  {{- if $store.to }}{{ $_ := set $rule "to" $store.to }}{{ end }}
  {{- $out = append $out $rule }}
  {{- end }}
  egress:
    {{- toYaml $out | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* A component's mTLS certificate from cert-manager: server and client use, its Service names as SANs. */}}
{{- define "ragmesh.certificate" -}}
{{- $m := .root.Values.mtls -}}
{{- $name := include "ragmesh.componentName" . -}}
{{- $ns := .root.Release.Namespace -}}
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ $name }}
  labels:
    {{- include "ragmesh.labels" . | nindent 4 }}
spec:
  secretName: {{ $name }}-tls
  commonName: {{ $name }}
  dnsNames:
    - {{ $name }}
    - {{ $name }}.{{ $ns }}
    - {{ $name }}.{{ $ns }}.svc
    - {{ $name }}.{{ $ns }}.svc.cluster.local
  duration: {{ $m.certManager.duration }}
  renewBefore: {{ $m.certManager.renewBefore }}
  privateKey:
    algorithm: ECDSA
    size: 256
    rotationPolicy: Always
  usages:
    - server auth
    - client auth
    - digital signature
    - key encipherment
  issuerRef:
    name: {{ required "mtls.certManager.issuerRef.name is required when mtls.certManager.enabled" $m.certManager.issuerRef.name }}
    kind: {{ $m.certManager.issuerRef.kind }}
    group: {{ $m.certManager.issuerRef.group }}
{{- end -}}
