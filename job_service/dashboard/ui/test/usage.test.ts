import { describe, expect, it } from 'vitest';

import { rangeWords } from '../format';
import { budgetTitle } from '../usage';

describe('budgetTitle', () => {
  it("calls a student's own row hers, in the budget's rolling period", () => {
    expect(budgetTitle({ admin: false, teacher: false }, 'week')).toBe(
      'Your GPU-hours in the last 7 days'
    );
  });

  it('names what a teacher and an admin see', () => {
    expect(budgetTitle({ admin: false, teacher: true }, 'day')).toBe(
      'You and your students in the last 24 hours, against their budgets'
    );
    expect(budgetTitle({ admin: true, teacher: false }, 'week')).toBe(
      'Top users in the last 7 days, against their budgets'
    );
  });
});

describe('rangeWords', () => {
  it('says a report covers whole UTC days, as nbjobs usage does', () => {
    expect(rangeWords('2026-11-17', '2026-11-30')).toBe(
      'from 2026-11-17 to 2026-11-30 (whole UTC days)'
    );
  });
});
