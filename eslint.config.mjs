// The TypeScript linter of the Lab extension and the dashboard (`jlpm lint:check`).
// typescript-eslint's recommended rules, JupyterLab's naming of interfaces (I-prefixed),
// and prettier's config last so that layout is prettier's alone.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['lib/', 'node_modules/', 'nbjobs/', 'build/', 'docs/', '.venv/', 'api/openapi.d.ts']
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { globals: { ...globals.browser } },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        { selector: 'interface', format: ['PascalCase'], prefix: ['I'] }
      ],
      // JupyterLab's own idiom for command ids (namespace CommandIDs)
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { args: 'none' }],
      eqeqeq: ['error', 'smart'],
      'prefer-arrow-callback': 'error',
      curly: ['error', 'all']
    }
  },
  {
    // the house limit on a function's length (tests/common/test_layout.py holds the
    // Python to it)
    files: ['labextension/src/**/*.ts', 'job_service/dashboard/ui/**/*.ts'],
    ignores: ['job_service/dashboard/ui/test/**'],
    rules: { 'max-lines-per-function': ['error', { max: 80 }] }
  },
  prettier
);
