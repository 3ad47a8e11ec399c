// Lookups: objects a decision reads that it could not declare statically. A decision
// names every lookup it reads, on every call; `Lookups` reads the answers the host put
// in the input and remembers what was asked, and `finish()` turns that into the
// `look-up` actions. A lookup with no answer yet reads as "nothing found": the host
// performs none of such a call's other actions, answers, and calls again.

import type { Action, Input, KubeObject, Lookup } from './objects.ts';
import type { Kind } from './objects.ts';

export class Lookups {
  private readonly asked: Lookup[] = [];
  private unanswered = 0;

  constructor(private readonly input: Input) {}

  /** The object of `kind` named `name` in `namespace` ("" for the parent's), if there is one. */
  named(kind: Kind, name: string, namespace = ''): KubeObject | undefined {
    return this.ask({ kind: kind.gvk, namespace, match: { tag: 'name', val: name } })[0];
  }

  /** The objects of `kind` in the parent's namespace carrying every one of `labels`. */
  labelled(kind: Kind, labels: Record<string, string>): KubeObject[] {
    const val = Object.entries(labels).map(([key, value]) => ({ key, value }));
    return this.ask({ kind: kind.gvk, namespace: '', match: { tag: 'labels', val } });
  }

  /** Whether every lookup asked so far has its answer in the input. */
  answered(): boolean {
    return this.unanswered === 0;
  }

  /** The `look-up` actions naming every lookup read. */
  finish(): Action[] {
    return this.asked.map((l) => ({ tag: 'look-up', val: l }));
  }

  private ask(lookup: Lookup): KubeObject[] {
    this.asked.push(lookup);
    const answer = this.input.lookedUp.find((a) => JSON.stringify(a.lookup) === JSON.stringify(lookup));
    if (!answer) this.unanswered += 1;
    return answer?.objects ?? [];
  }
}
