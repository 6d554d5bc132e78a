// One written form per IP address, so that two spellings of it compare equal.

/**
 * An IPv4 address mapped into IPv6 (as a socket bound to [::] sees it) as itself, and IPv6 in
 * its compressed lower-case form ("0:0::1" and "::1" are one address: the URL parser writes IPv6
 * hosts canonically). One with a zone id, and anything else, is only lower-cased.
 */
export function canonicalIp(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped !== null) return mapped[1] ?? ip;
  if (!ip.includes(":") || ip.includes("%")) return ip.toLowerCase();
  try {
    return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  } catch {
    return ip.toLowerCase();
  }
}
