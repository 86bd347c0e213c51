//! Which `Host` headers the dashboard answers. A web page from anywhere can make the browser
//! ask a name it controls, re-pointed at 127.0.0.1 (DNS rebinding), and read the answer as its
//! own; such a request still carries the attacker's name in `Host`. So only names that cannot
//! be re-pointed are answered: loopback names and addresses, and the address the server listens
//! on.

use std::net::IpAddr;

/// Whether a request with this `Host` header (`None`: none, as HTTP/1.0 allows) is answered by
/// a server listening on `bound`. The port, if any, is not compared: a loopback name on any
/// port is still this machine.
pub fn allowed(host: Option<&str>, bound: IpAddr) -> bool {
    let Some(host) = host else { return true };
    let Some(name) = without_port(host.trim()) else { return false };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6.parse::<IpAddr>().ok().filter(IpAddr::is_ipv6),
        None => name.parse::<IpAddr>().ok().filter(IpAddr::is_ipv4),
    };
    // Listening on every interface (0.0.0.0, ::), the server is reached by any of the machine's
    // addresses, which it does not list; an address, unlike a name, cannot be re-pointed.
    ip.is_some_and(|ip| ip.is_loopback() || ip == bound || bound.is_unspecified())
}

/// `name` of `name:port` or `[v6]:port` (or of either without a port); `None` when what follows
/// the name is not a port.
fn without_port(host: &str) -> Option<&str> {
    let (name, port) = match host.rfind(':') {
        // `[::1]` alone ends in `]`; its colons are inside the brackets.
        Some(i) if !host[i..].contains(']') => (&host[..i], Some(&host[i + 1..])),
        _ => (host, None),
    };
    match port {
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => None,
        _ if name.is_empty() => None,
        _ => Some(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn loopback_names_with_or_without_a_port_are_answered() {
        for host in ["localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:41234", "127.1.2.3:80", "[::1]", "[::1]:9"]
        {
            assert!(allowed(Some(host), LOOPBACK), "{host}");
        }
        assert!(allowed(None, LOOPBACK), "HTTP/1.0 sends no Host");
    }

    #[test]
    fn other_names_and_malformed_hosts_are_refused() {
        for host in [
            "evil.example.com",
            "evil.example.com:8080",
            "localhost.evil.example.com",
            "127.0.0.1.evil.example.com",
            "10.0.0.5:8080",
            "::1",
            "[127.0.0.1]",
            "127.0.0.1:",
            "127.0.0.1:80x",
            ":80",
            "",
        ] {
            assert!(!allowed(Some(host), LOOPBACK), "{host}");
        }
    }

    #[test]
    fn the_listening_address_is_answered_and_every_address_when_listening_on_all() {
        let lan: IpAddr = "10.0.0.5".parse().unwrap();
        assert!(allowed(Some("10.0.0.5:8080"), lan));
        assert!(!allowed(Some("10.0.0.6:8080"), lan));
        let all: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(allowed(Some("10.0.0.6:8080"), all));
        assert!(allowed(Some("[fe80::1]:8080"), "::".parse().unwrap()));
        assert!(!allowed(Some("evil.example.com"), all), "a name is refused on every interface");
    }
}
