# certs.bash — private CAs for tests of https (t/artifact_https.sh,
# t/cache_https.sh); sourced after common.bash (uses $TMP).
# mkca NAME: $TMP/NAME-ca.{crt,key} (a CA) and $TMP/NAME.{crt,key}, a server
# certificate for IP 127.0.0.1 signed by it; openssl's output goes to
# $TMP/openssl.log. Returns openssl's failure.
mkca() {
    local n=$1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=drover test CA $n" -keyout "$TMP/$n-ca.key" -out "$TMP/$n-ca.crt" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
        2>>"$TMP/openssl.log" &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$TMP/$n.key" -out "$TMP/$n.csr" 2>>"$TMP/openssl.log" &&
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
        >"$TMP/$n.ext" &&
    openssl x509 -req -in "$TMP/$n.csr" -CA "$TMP/$n-ca.crt" -CAkey "$TMP/$n-ca.key" \
        -CAcreateserial -days 2 -extfile "$TMP/$n.ext" -out "$TMP/$n.crt" 2>>"$TMP/openssl.log"
}
