import { describe, expect, it } from 'vitest';

import { dashboardUrl } from '../src/dashboard';

describe('dashboardUrl', () => {
  it('is the hub services path beside the hub', () => {
    expect(dashboardUrl('', '/hub/')).toBe('/services/nbjobs/');
    expect(dashboardUrl('', '/jupyter/hub/')).toBe('/jupyter/services/nbjobs/');
    expect(dashboardUrl('https://hub.example.org', '/hub/')).toBe(
      'https://hub.example.org/services/nbjobs/'
    );
  });

  it('is null without a hub', () => {
    expect(dashboardUrl('', '')).toBeNull();
  });
});
