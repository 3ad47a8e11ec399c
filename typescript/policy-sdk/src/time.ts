// Kubernetes timestamps from the host's clock (`input.now`, milliseconds since the Unix
// epoch): a policy has no clock of its own.

/** RFC 3339 in UTC with seconds, as Kubernetes writes `metav1.Time`: `2026-11-22T14:27:49Z`. */
export function rfc3339(millis: number): string {
  const secs = Math.floor(millis / 1000);
  const days = Math.floor(secs / 86_400);
  const rem = secs - days * 86_400;
  const [y, m, d] = civilFromDays(days);
  const two = (n: number) => String(n).padStart(2, '0');
  const hms = `${two(Math.floor(rem / 3600))}:${two(Math.floor((rem % 3600) / 60))}:${two(rem % 60)}`;
  return `${String(y).padStart(4, '0')}-${two(m)}-${two(d)}T${hms}Z`;
}

/** Days since 1970-01-01 to [year, month, day], proleptic Gregorian (H. Hinnant's algorithm). */
function civilFromDays(days: number): [number, number, number] {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}
