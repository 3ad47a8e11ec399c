//! The decision, step by step as the kubebuilder tutorial's `Reconcile` takes them:
//!
//! 1. sort the Jobs the CronJob controls into active, successful and failed, and find
//!    the most recent scheduled time among them (the `scheduled-at` annotation);
//! 2. write the status: the active Jobs and the last schedule time;
//! 3. delete finished Jobs beyond the history limits, oldest first;
//! 4. if suspended, stop there;
//! 5. find the last missed run and the next one from the schedule;
//! 6. create a Job for the last missed run (none older than `startingDeadlineSeconds`
//!    counts), unless the concurrency policy says otherwise (`Forbid`: skip while one runs; `Replace`:
//!    delete the running ones first);
//! 7. come back at the next scheduled time.
//!
//! Two departures, both where the tutorial's controller misbehaves: the last schedule
//! time never moves back (the tutorial recomputes it from the Jobs it still has, so with
//! a history limit of 0 it forgets the run it just made and makes it again), and a Job
//! going away (deleted, or deletion in flight) counts as neither active nor finished.
//! The clock is `input.now`: a policy has none of its own, so a recorded decision
//! replays exactly.

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use policy_sdk::time::rfc3339;
use policy_sdk::{Action, Input, Object, PolicyError, Status, create, delete, error, event};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::JOB;
use crate::types::{ConcurrencyPolicy, CronJobSpec, CronJobStatus, JobReference};

/// The annotation on every Job it creates: the scheduled time the Job runs for.
pub const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";
/// As the tutorial: more missed start times than this is a clock or deadline problem.
pub const MAX_MISSED: usize = 100;

pub fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> {
    let parent = &input.parent;
    if parent.meta.deleting {
        // Every Job carries the CronJob as its owner: the garbage collector removes them.
        return Ok(Vec::new());
    }
    let spec: CronJobSpec = parent.spec()?;
    let current: CronJobStatus = parent.status()?;
    let now = input.now;

    // 1. The Jobs, by state.
    let jobs = Jobs::of(input)?;
    let last_schedule =
        [jobs.most_recent, current.last_schedule_time.as_deref().map(millis).transpose()?].into_iter().flatten().max();

    // 2. The status.
    let mut actions = Vec::new();
    let next_status = CronJobStatus {
        active: jobs.active.iter().map(|j| reference(j)).collect(),
        last_schedule_time: last_schedule.map(rfc3339),
        conditions: current.conditions.clone(),
        policy_digest: current.policy_digest.clone(),
    };
    actions.extend(next_status.update_from(&current)?);

    // 3. The history.
    for (finished, limit) in
        [(&jobs.failed, spec.failed_jobs_history_limit), (&jobs.successful, spec.successful_jobs_history_limit)]
    {
        actions.extend(beyond(finished, limit).map(|j| delete(JOB, &j.object.meta.name)));
    }

    // 4. Suspended: nothing more until it is resumed (which is an update: it wakes us).
    if spec.suspend == Some(true) {
        return Ok(actions);
    }

    // 5. The runs.
    let schedule = parse(&spec.schedule)?;
    let earliest = last_schedule.unwrap_or(parent.meta.created_at);
    let runs = runs(&schedule, earliest, now, spec.starting_deadline_seconds)?;
    let come_back = Action::RequeueAfter(until(now, runs.next));
    let Some(missed) = runs.missed else {
        actions.push(come_back);
        return Ok(actions);
    };

    // 6. The Job for the missed run, if it may start. (`runs` counts no run older than
    // `startingDeadlineSeconds`: the tutorial's later "too late" test cannot hold.)
    let name = format!("{}-{}", parent.meta.name, missed.div_euclid(1000));
    let exists = input.child(JOB, &name).is_some() || input.creating(JOB, &name);
    if exists {
        // Created already; its status comes with the next decision.
    } else if spec.concurrency_policy == ConcurrencyPolicy::Forbid && !jobs.active.is_empty() {
        let message = "Not starting job because prior execution is running and concurrency policy is Forbid";
        actions.push(event(false, "JobAlreadyActive", message));
    } else {
        if spec.concurrency_policy == ConcurrencyPolicy::Replace {
            actions.extend(jobs.active.iter().map(|j| delete(JOB, &j.object.meta.name)));
        }
        actions.push(create(&job(&name, missed, &spec.job_template)?)?);
    }

    // 7. The next run.
    actions.push(come_back);
    Ok(actions)
}

/// A Job the CronJob controls, with what the decision reads of it.
pub struct Job<'a> {
    pub object: &'a Object,
    /// `status.startTime`, milliseconds.
    started: Option<i64>,
}

/// The Jobs, by state, and the latest scheduled time among them.
struct Jobs<'a> {
    active: Vec<Job<'a>>,
    successful: Vec<Job<'a>>,
    failed: Vec<Job<'a>>,
    most_recent: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct JobStatus {
    start_time: Option<String>,
    conditions: Vec<JobCondition>,
}

#[derive(Deserialize)]
struct JobCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl<'a> Jobs<'a> {
    fn of(input: &'a Input) -> Result<Self, PolicyError> {
        let mut jobs = Jobs { active: Vec::new(), successful: Vec::new(), failed: Vec::new(), most_recent: None };
        for object in input.children(JOB) {
            if object.meta.deleting || input.deleting(JOB, &object.meta.name) {
                continue;
            }
            let status: JobStatus = object.status()?;
            let finished = |t: &str| status.conditions.iter().any(|c| c.type_ == t && c.status == "True");
            let job = Job { object, started: status.start_time.as_deref().map(millis).transpose()? };
            if finished("Failed") {
                jobs.failed.push(job);
            } else if finished("Complete") {
                jobs.successful.push(job);
            } else {
                jobs.active.push(job);
            }
            // A Job without the annotation (or with one it cannot read) is not ours to
            // date: the tutorial skips it too.
            let scheduled = object.meta.annotations.iter().find(|kv| kv.key == SCHEDULED_AT);
            if let Some(at) = scheduled.and_then(|kv| millis(&kv.value).ok()) {
                jobs.most_recent = jobs.most_recent.max(Some(at));
            }
        }
        jobs.active.sort_by(|a, b| a.object.meta.name.cmp(&b.object.meta.name));
        Ok(jobs)
    }
}

/// The oldest finished Jobs (by start time, never-started first) beyond `limit`.
fn beyond<'a, 'b>(finished: &'b [Job<'a>], limit: Option<i32>) -> impl Iterator<Item = &'b Job<'a>> {
    let keep = limit.map_or(finished.len(), |l| usize::try_from(l).unwrap_or(0));
    let mut oldest_first: Vec<&Job> = finished.iter().collect();
    oldest_first.sort_by(|a, b| (a.started, &a.object.meta.name).cmp(&(b.started, &b.object.meta.name)));
    let n = finished.len().saturating_sub(keep);
    oldest_first.into_iter().take(n)
}

fn reference(job: &Job) -> JobReference {
    JobReference {
        api_version: JOB.api_version(),
        kind: JOB.kind.into(),
        namespace: job.object.meta.namespace.clone(),
        name: job.object.meta.name.clone(),
        uid: job.object.meta.uid.clone(),
    }
}

/// A standard cron schedule: five fields or a `@` shorthand, as robfig/cron's
/// `ParseStandard` takes them (no seconds, no year).
pub fn parse(schedule: &str) -> Result<Cron, PolicyError> {
    let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
    parser.parse(schedule).map_err(|e| error("InvalidSchedule", format!("unparseable schedule {schedule:?}: {e}")))
}

/// The last run missed at `now` (if any) and the next one.
struct Runs {
    missed: Option<i64>,
    next: i64,
}

fn runs(schedule: &Cron, earliest: i64, now: i64, deadline_seconds: Option<i64>) -> Result<Runs, PolicyError> {
    // Runs older than the deadline would be too late anyway: do not count them.
    let earliest = match deadline_seconds {
        Some(s) => earliest.max(now.saturating_sub(s.saturating_mul(1000))),
        None => earliest,
    };
    let next = |after: i64| next_after(schedule, after);
    if earliest > now {
        return Ok(Runs { missed: None, next: next(now)? });
    }
    let (mut missed, mut starts) = (None, 0usize);
    let mut t = next(earliest)?;
    while t <= now {
        missed = Some(t);
        starts += 1;
        if starts > MAX_MISSED {
            return Err(error(
                "TooManyMissedStartTimes",
                format!(
                    "Too many missed start times (> {MAX_MISSED}). Set or decrease .spec.startingDeadlineSeconds or check clock skew."
                ),
            ));
        }
        t = next(t)?;
    }
    Ok(Runs { missed, next: next(now)? })
}

/// The first scheduled time strictly after `after` (milliseconds, UTC).
fn next_after(schedule: &Cron, after: i64) -> Result<i64, PolicyError> {
    let at = utc(after)?;
    let next = schedule.find_next_occurrence(&at, false).map_err(|e| {
        error("InvalidSchedule", format!("schedule {:?} has no time after {at}: {e}", schedule.pattern))
    })?;
    Ok(next.timestamp_millis())
}

/// Milliseconds until `at`, as `requeue-after` takes them.
fn until(now: i64, at: i64) -> u32 {
    u32::try_from(at.saturating_sub(now).max(1)).unwrap_or(u32::MAX)
}

fn utc(ms: i64) -> Result<DateTime<Utc>, PolicyError> {
    Utc.timestamp_millis_opt(ms).single().ok_or_else(|| error("InvalidTime", format!("{ms} ms is out of range")))
}

/// An RFC 3339 time in milliseconds.
fn millis(text: &str) -> Result<i64, PolicyError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| error("InvalidTime", format!("{text:?} is not an RFC 3339 time: {e}")))
}

/// The Job for the run at `scheduled`: the template's metadata and spec, and the
/// annotation that dates it. The host sets the namespace, the owner reference and the
/// restricted security context.
pub fn job(name: &str, scheduled: i64, template: &Value) -> Result<Value, PolicyError> {
    let meta = |field: &str| template.pointer(&format!("/metadata/{field}")).and_then(Value::as_object).cloned();
    let labels = meta("labels").unwrap_or_default();
    let mut annotations: Map<String, Value> = meta("annotations").unwrap_or_default();
    annotations.insert(SCHEDULED_AT.into(), Value::String(rfc3339(scheduled)));
    let spec = template.get("spec").cloned().ok_or_else(|| error("InvalidJobTemplate", "jobTemplate has no spec"))?;
    let mut metadata = json!({ "name": name, "annotations": annotations });
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels);
    }
    Ok(json!({ "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec }))
}

#[cfg(test)]
mod tests {
    use policy_sdk::testing::{created, deleted, input, object, requeue_after as requeue, status};
    use policy_sdk::{KeyValue, ObjectKey};

    use super::*;
    use crate::CRONJOB;

    /// 2023-11-14T22:13:20Z, the CronJob's creation in `policy_sdk::testing`.
    const CREATED: i64 = 1_700_000_000_000;
    const MINUTE: i64 = 60_000;

    fn cronjob(spec: Value) -> Object {
        let mut body = json!({ "spec": {
            "schedule": "*/1 * * * *",
            "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "OnFailure",
                "containers": [{ "name": "hello", "image": "busybox", "args": ["date"] }]
            } } } }
        } });
        if let (Some(base), Some(extra)) = (body["spec"].as_object_mut(), spec.as_object()) {
            base.extend(extra.clone());
        }
        object(CRONJOB, "hello", body)
    }

    /// A Job of the CronJob for the run at `at`, in `state` ("Complete", "Failed" or running).
    fn job_at(at: i64, state: Option<&str>) -> Object {
        let conditions: Vec<Value> = state.into_iter().map(|t| json!({ "type": t, "status": "True" })).collect();
        let mut o = object(
            JOB,
            &format!("hello-{}", at / 1000),
            json!({ "status": { "startTime": rfc3339(at + 1000), "conditions": conditions } }),
        );
        o.meta.annotations.push(KeyValue { key: SCHEDULED_AT.into(), value: rfc3339(at) });
        o
    }

    fn at(parent: Object, now: i64, children: Vec<Object>) -> Input {
        let mut i = input(parent);
        i.now = now;
        i.children = children;
        i
    }

    /// The first whole minute after the creation time: 2023-11-14T22:14:00Z.
    const FIRST: i64 = (CREATED / MINUTE + 1) * MINUTE;

    #[test]
    fn before_the_first_run_it_waits_for_it() {
        let actions = reconcile(&at(cronjob(json!({})), CREATED + 5_000, vec![])).expect("decides");
        assert!(created(&actions).is_empty(), "{actions:?}");
        assert_eq!(requeue(&actions), Some((FIRST - CREATED - 5_000) as u32));
    }

    #[test]
    fn a_run_is_a_job_named_by_its_scheduled_time_with_the_template() {
        let mut parent = cronjob(json!({}));
        parent.body = {
            let mut b: Value = serde_json::from_str(&parent.body).expect("json");
            b["spec"]["jobTemplate"]["metadata"] = json!({ "labels": { "team": "a" }, "annotations": { "note": "x" } });
            b.to_string()
        };
        let actions = reconcile(&at(parent, FIRST + 2_000, vec![])).expect("decides");
        let jobs = created(&actions);
        assert_eq!(jobs.len(), 1, "{actions:?}");
        let job = &jobs[0];
        assert_eq!(job["metadata"]["name"], format!("hello-{}", FIRST / 1000));
        assert_eq!(job["metadata"]["annotations"][SCHEDULED_AT], "2023-11-14T22:14:00Z");
        assert_eq!(job["metadata"]["annotations"]["note"], "x");
        assert_eq!(job["metadata"]["labels"]["team"], "a");
        assert_eq!(job["spec"]["template"]["spec"]["containers"][0]["image"], "busybox");
        assert_eq!(requeue(&actions), Some((MINUTE - 2_000) as u32), "back at the next minute");
    }

    #[test]
    fn only_the_last_missed_run_starts_and_a_created_one_is_not_created_again() {
        // Down for five minutes: one Job, for the last of them (as the tutorial).
        let now = FIRST + 5 * MINUTE + 1_000;
        let jobs = created(&reconcile(&at(cronjob(json!({})), now, vec![])).expect("decides"));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0]["metadata"]["name"], format!("hello-{}", (FIRST + 5 * MINUTE) / 1000));

        let mut i = at(cronjob(json!({})), now, vec![]);
        i.in_flight
            .creations
            .push(ObjectKey { kind: JOB.gvk(), name: format!("hello-{}", (FIRST + 5 * MINUTE) / 1000) });
        assert!(created(&reconcile(&i).expect("decides")).is_empty(), "in flight: not again");
    }

    #[test]
    fn the_status_lists_running_jobs_and_the_last_schedule_time() {
        let children = vec![job_at(FIRST, Some("Complete")), job_at(FIRST + MINUTE, None)];
        let actions = reconcile(&at(cronjob(json!({})), FIRST + MINUTE + 500, children)).expect("decides");
        let s: CronJobStatus = status(&actions).expect("a status");
        assert_eq!(s.active.len(), 1);
        assert_eq!(s.active[0].name, format!("hello-{}", (FIRST + MINUTE) / 1000));
        assert_eq!((s.active[0].kind.as_str(), s.active[0].api_version.as_str()), ("Job", "batch/v1"));
        assert_eq!(s.last_schedule_time.as_deref(), Some("2023-11-14T22:15:00Z"));
        assert!(created(&actions).is_empty(), "the run of 22:15 exists");
    }

    #[test]
    fn finished_jobs_beyond_the_limits_go_oldest_first() {
        let children = vec![
            job_at(FIRST, Some("Complete")),
            job_at(FIRST + MINUTE, Some("Failed")),
            job_at(FIRST + 2 * MINUTE, Some("Complete")),
            job_at(FIRST + 3 * MINUTE, Some("Failed")),
            job_at(FIRST + 4 * MINUTE, Some("Complete")),
        ];
        let limits = json!({ "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1 });
        let actions = reconcile(&at(cronjob(limits), FIRST + 4 * MINUTE + 500, children.clone())).expect("decides");
        let name = |t: i64| format!("hello-{}", (FIRST + t * MINUTE) / 1000);
        assert_eq!(deleted(&actions), vec![name(1), name(0)]);
        // No limits: everything stays.
        let actions = reconcile(&at(cronjob(json!({})), FIRST + 4 * MINUTE + 500, children)).expect("decides");
        assert!(deleted(&actions).is_empty());
    }

    #[test]
    fn with_no_history_kept_the_last_run_is_not_made_again() {
        // The run of 22:14 finished and was deleted (limit 0): the status remembers it.
        let mut parent = cronjob(json!({ "successfulJobsHistoryLimit": 0 }));
        let mut b: Value = serde_json::from_str(&parent.body).expect("json");
        b["status"] = json!({ "lastScheduleTime": rfc3339(FIRST) });
        parent.body = b.to_string();
        let actions = reconcile(&at(parent, FIRST + 30_000, vec![])).expect("decides");
        assert!(created(&actions).is_empty(), "{actions:?}");
        assert!(status::<CronJobStatus>(&actions).is_none(), "nothing changed: {actions:?}");
    }

    #[test]
    fn suspended_it_keeps_its_status_and_history_and_starts_nothing() {
        let children = vec![job_at(FIRST, Some("Complete")), job_at(FIRST + MINUTE, Some("Complete"))];
        let spec = json!({ "suspend": true, "successfulJobsHistoryLimit": 1 });
        let actions = reconcile(&at(cronjob(spec), FIRST + 3 * MINUTE, children)).expect("decides");
        assert!(created(&actions).is_empty());
        assert_eq!(deleted(&actions), vec![format!("hello-{}", FIRST / 1000)]);
        assert_eq!(requeue(&actions), None, "resuming is an update, which wakes it");
    }

    #[test]
    fn a_run_past_the_starting_deadline_is_skipped() {
        // The run of 22:15 is 40 s late with a 30 s deadline: it never starts.
        let spec = json!({ "startingDeadlineSeconds": 30 });
        let children = vec![job_at(FIRST, Some("Complete"))];
        let actions = reconcile(&at(cronjob(spec), FIRST + MINUTE + 40_000, children)).expect("decides");
        assert!(created(&actions).is_empty(), "{actions:?}");
        assert_eq!(requeue(&actions), Some(20_000), "back for the run of 22:16");
        // Within the deadline, it starts.
        let spec = json!({ "startingDeadlineSeconds": 60 });
        let children = vec![job_at(FIRST, Some("Complete"))];
        let actions = reconcile(&at(cronjob(spec), FIRST + MINUTE + 40_000, children)).expect("decides");
        assert_eq!(created(&actions).len(), 1);
    }

    #[test]
    fn forbid_waits_for_the_running_job_and_replace_deletes_it() {
        let running = vec![job_at(FIRST, None)];
        let now = FIRST + MINUTE + 1_000;
        let forbid =
            reconcile(&at(cronjob(json!({ "concurrencyPolicy": "Forbid" })), now, running.clone())).expect("decides");
        assert!(created(&forbid).is_empty());
        assert!(forbid.iter().any(|a| matches!(a, Action::EmitEvent(e) if e.reason == "JobAlreadyActive")));

        let replace =
            reconcile(&at(cronjob(json!({ "concurrencyPolicy": "Replace" })), now, running.clone())).expect("decides");
        assert_eq!(deleted(&replace), vec![format!("hello-{}", FIRST / 1000)]);
        assert_eq!(created(&replace).len(), 1);

        let allow = reconcile(&at(cronjob(json!({})), now, running)).expect("decides");
        assert!(deleted(&allow).is_empty());
        assert_eq!(created(&allow).len(), 1, "Allow: side by side");
    }

    #[test]
    fn standard_cron_semantics_hold() {
        let after = |schedule: &str, t: &str| {
            let ms = millis(t).expect("time");
            rfc3339(next_after(&parse(schedule).expect("parses"), ms).expect("a next time"))
        };
        // 2023-11-14 is a Tuesday. Sunday is 0 or 7.
        assert_eq!(after("0 9 * * 0", "2023-11-14T00:00:00Z"), "2023-11-19T09:00:00Z");
        assert_eq!(after("0 9 * * 7", "2023-11-14T00:00:00Z"), "2023-11-19T09:00:00Z");
        // Day of month OR day of week, as Vixie cron.
        assert_eq!(after("0 0 1 * 3", "2023-11-14T00:00:00Z"), "2023-11-15T00:00:00Z");
        assert_eq!(after("@hourly", "2023-11-14T10:30:00Z"), "2023-11-14T11:00:00Z");
        assert_eq!(after("@daily", "2023-11-14T10:30:00Z"), "2023-11-15T00:00:00Z");
        // Strictly after.
        assert_eq!(after("*/5 * * * *", "2023-11-14T10:30:00Z"), "2023-11-14T10:35:00Z");
        for bad in ["", "* * * *", "0 * * * * *", "61 * * * *", "@every 1h", "tomorrow"] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert_eq!(e.reason, "InvalidSchedule");
        }
    }

    #[test]
    fn more_than_a_hundred_missed_runs_is_an_error_unless_a_deadline_bounds_them() {
        let now = CREATED + 200 * MINUTE;
        let e = reconcile(&at(cronjob(json!({})), now, vec![])).expect_err("an error");
        assert_eq!(e.reason, "TooManyMissedStartTimes");
        let actions = reconcile(&at(cronjob(json!({ "startingDeadlineSeconds": 120 })), now, vec![])).expect("ok");
        assert_eq!(created(&actions).len(), 1);
    }

    #[test]
    fn deleting_it_decides_nothing() {
        let parent = policy_sdk::testing::deleting(cronjob(json!({})));
        assert!(reconcile(&at(parent, FIRST + MINUTE, vec![job_at(FIRST, None)])).expect("ok").is_empty());
    }
}
