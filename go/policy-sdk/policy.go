package policy

import (
	"fmt"

	"podset.dev/policy-sdk/internal/contract"
)

// Contract is the version of wit/policy.wit's package this SDK was generated from: the
// host refuses a module built against another contract.
const Contract = contract.Version

// Policy is a reconcile policy: who it is, what it reconciles, and its decision.
type Policy struct {
	Name     string
	Version  string
	Declares Declarations
	// Decide is one decision: a pure function of in. Return an *Error when it cannot
	// decide.
	Decide func(in *Input, log Logger) ([]Action, error)
}

// Declarations say what a policy reconciles. The host watches exactly these kinds,
// checks at load that its own identity may act on them, and refuses any action outside
// them.
type Declarations struct {
	// Parent is the kind of the objects reconciled.
	Parent Kind
	// Children are the kinds of the objects a parent owns: created, applied and deleted
	// by the policy, each carrying the parent as its controller owner.
	Children []Kind
	// Related are kinds read through label selectors, never written.
	Related []RelatedKind
	// Finalizer, when not "", is added to every parent; a parent being deleted is
	// reconciled until its policy returns FinalizeDone.
	Finalizer string
	// Lookups are the kinds the policy may look up (see Lookups).
	Lookups []LookupKind
}

// RelatedKind is objects a policy reads but does not own: of Kind, in the parent's
// namespace, carrying every label in Selector. An empty selector selects nothing.
type RelatedKind struct {
	Kind     Kind
	Selector []LabelRequirement
}

// LabelRequirement is `Key` equal to a value derived from the parent: Exact when
// neither ParentName nor ParentLabel is set.
type LabelRequirement struct {
	Key string
	// Exact is the literal value.
	Exact string
	// ParentName: the value is the parent's `metadata.name`.
	ParentName bool
	// ParentLabel, when not "": the value of the parent's label with this key.
	ParentLabel string
}

// LookupKind is a kind a policy may look up by name or labels; with Patch, it may
// merge-patch the objects it found (never create or delete them).
type LookupKind struct {
	Kind  Kind
	Patch bool
}

// Level is a log line's level.
type Level int

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// Logger writes lines into the host's log, with the parent in context.
type Logger struct {
	sink func(Level, string)
}

// NewLogger is a Logger over sink: the host's `log`, or a test's recorder.
func NewLogger(sink func(Level, string)) Logger { return Logger{sink: sink} }

func (l Logger) logf(level Level, format string, args []any) {
	if l.sink != nil {
		l.sink(level, fmt.Sprintf(format, args...))
	}
}

func (l Logger) Tracef(format string, args ...any) { l.logf(LevelTrace, format, args) }
func (l Logger) Debugf(format string, args ...any) { l.logf(LevelDebug, format, args) }
func (l Logger) Infof(format string, args ...any)  { l.logf(LevelInfo, format, args) }
func (l Logger) Warnf(format string, args ...any)  { l.logf(LevelWarn, format, args) }
func (l Logger) Errorf(format string, args ...any) { l.logf(LevelError, format, args) }
