{{/* Where the mutual-TLS certificates come from: existing, cert-manager or generated. */}}
{{- define "srv6pm.tls.mode" -}}
{{- if include "srv6pm.tls.existing" . -}}
existing
{{- else if include "srv6pm.tls.certManager" . -}}
cert-manager
{{- else -}}
generated
{{- end -}}
{{- end -}}

{{/*
The generated CA and both certificates (base64 PEM, and each one's end as a Unix time).
Computed once per render and kept in .Values, which every template of the chart shares, so
the Secrets and the pods' checksum annotations see the same material.
Each comes from the cluster (lookup) while it is more than renewBeforeDays from its end;
otherwise it is made anew, and a new CA re-signs both leaves.
*/}}
{{- define "srv6pm.tls.generated" -}}
{{- if not (hasKey .Values "srv6pmGeneratedTls") -}}
{{- $g := .Values.tls.generated -}}
{{- $now := now | unixEpoch | int64 -}}
{{- $renewBefore := mul $g.renewBeforeDays 86400 -}}
{{- $fullname := include "srv6pm.fullname" . -}}
{{- $out := dict -}}
{{- $ca := lookup "v1" "Secret" .Release.Namespace (printf "%s-ca" $fullname) -}}
{{- $caEnd := dig "metadata" "annotations" "srv6pm/not-after" "0" $ca | int64 -}}
{{- $caCert := dict -}}
{{- $caNew := true -}}
{{- if gt (sub $caEnd $renewBefore) $now -}}
{{- $caCert = buildCustomCert (index $ca.data "tls.crt") (index $ca.data "tls.key") -}}
{{- $caNew = false -}}
{{- $_ := set $out "ca" (dict "crt" (index $ca.data "tls.crt") "key" (index $ca.data "tls.key") "notAfter" $caEnd) -}}
{{- else -}}
{{- $caCert = genCA "srv6pm CA" (int $g.caValidityDays) -}}
{{- $_ := set $out "ca" (dict "crt" ($caCert.Cert | b64enc) "key" ($caCert.Key | b64enc) "notAfter" (add $now (mul $g.caValidityDays 86400))) -}}
{{- end -}}
{{- $leaves := list
      (dict "id" "controller" "secret" (printf "%s-controller-tls" $fullname) "name" "srv6pm-controller" "dns" list)
      (dict "id" "nodeManager" "secret" (printf "%s-node-manager-tls" $fullname) "name" .Values.tls.serverName "dns" (list .Values.tls.serverName)) -}}
{{- range $leaf := $leaves -}}
{{- $old := lookup "v1" "Secret" $.Release.Namespace $leaf.secret -}}
{{- $end := dig "metadata" "annotations" "srv6pm/not-after" "0" $old | int64 -}}
{{- $sameName := eq (dig "metadata" "annotations" "srv6pm/name" "" $old) $leaf.name -}}
{{- $sameCa := eq (dig "data" "ca.crt" "" $old) (get $out "ca").crt -}}
{{- if and (not $caNew) $sameCa $sameName (gt (sub $end $renewBefore) $now) -}}
{{- $_ := set $out $leaf.id (dict "crt" (index $old.data "tls.crt") "key" (index $old.data "tls.key") "notAfter" $end "name" $leaf.name) -}}
{{- else -}}
{{- $cert := genSignedCert $leaf.name nil $leaf.dns (int $g.certValidityDays) $caCert -}}
{{- $_ := set $out $leaf.id (dict "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "notAfter" (add $now (mul $g.certValidityDays 86400)) "name" $leaf.name) -}}
{{- end -}}
{{- end -}}
{{- $_ := set .Values "srv6pmGeneratedTls" $out -}}
{{- end -}}
{{- toYaml (get .Values "srv6pmGeneratedTls") -}}
{{- end -}}

{{/* A pod annotation that changes when the pod's certificate does (the services read it at start). */}}
{{- define "srv6pm.tls.checksum" -}}
{{- if eq (include "srv6pm.tls.mode" .) "generated" }}
checksum/tls: {{ include "srv6pm.tls.generated" . | sha256sum }}
{{- end }}
{{- end -}}
