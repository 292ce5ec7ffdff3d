export default 'lib';
