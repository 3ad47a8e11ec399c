//! The syntax Kubernetes requires of names, labels and condition reasons, checked
//! before anything a policy returns reaches the API server (whose own error would come
//! only after part of a decision was applied).

pub fn dns1123_subdomain(s: &str, max: usize) -> Result<(), String> {
    if s.is_empty() || s.len() > max {
        return Err(format!("must be 1 to {max} characters"));
    }
    let ok_label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(ok_label) {
        return Err("must be lowercase alphanumerics, '-' and '.', starting and ending alphanumeric".into());
    }
    Ok(())
}

/// Kubernetes' qualified name: `[prefix/]name`, name ≤ 63 of `[A-Za-z0-9_.-]`,
/// alphanumeric at both ends; prefix a DNS subdomain.
pub fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        dns1123_subdomain(p, 253).map_err(|e| format!("prefix {e}"))?;
    }
    if name.is_empty() || name.len() > 63 {
        return Err("name part must be 1 to 63 characters".into());
    }
    label_value(name)
}

pub fn label_value(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be at most 63 characters".into());
    }
    let edge_ok = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || !edge_ok(s.chars().next())
        || !edge_ok(s.chars().last())
    {
        return Err("must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric".into());
    }
    Ok(())
}

/// metav1.Condition's reason: CamelCase, `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
pub fn condition_reason(s: &str) -> Result<(), String> {
    let ok = s.len() <= 1024
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok { Ok(()) } else { Err("must be CamelCase (letters, digits, '_', ',' or ':'), starting with a letter".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_syntax() {
        assert!(dns1123_subdomain("web-a.b", 253).is_ok());
        assert!(dns1123_subdomain("Web_A", 253).is_err());
        assert!(dns1123_subdomain(&"x".repeat(300), 253).is_err());
        assert!(qualified_name("app.example.com/podset").is_ok());
        assert!(qualified_name("tier").is_ok());
        assert!(qualified_name("/tier").is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("not valid!").is_err());
        assert!(condition_reason("MinimumReplicasAvailable").is_ok());
        assert!(condition_reason("not camel").is_err());
        assert!(condition_reason("").is_err());
    }
}
